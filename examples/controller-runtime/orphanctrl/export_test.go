package orphanctrl

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// VolumesReady is l.volumesReady, for the tests outside the package.
func VolumesReady(l *LocalCache, cached []unstructured.Unstructured) bool {
	return l.volumesReady(cached)
}
