package kubetest

import (
	"bytes"
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// resources maps the kinds the example's manifests use to their resources.
var resources = map[string]schema.GroupVersionResource{
	"ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
	"Role":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"DaemonSet":      {Group: "apps", Version: "v1", Resource: "daemonsets"},
}

// Objects splits a YAML manifest of "---"-separated documents into objects.
func Objects(manifest []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(manifest, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("kubetest: manifest: %w", err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out, nil
}

// Create creates each object in namespace ns (whatever its manifest
// says), as a server-side dry run if dryRun is set: the API server then
// validates the object completely and stores nothing.
func Create(ctx context.Context, dc dynamic.Interface, ns string, dryRun bool, objs ...*unstructured.Unstructured) error {
	var opts metav1.CreateOptions
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		gvr, ok := resources[o.GetKind()]
		if !ok {
			return fmt.Errorf("kubetest: no resource known for kind %s", o.GetKind())
		}
		o = o.DeepCopy()
		o.SetNamespace(ns)
		if _, err := dc.Resource(gvr).Namespace(ns).Create(ctx, o, opts); err != nil {
			return fmt.Errorf("kubetest: creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}
