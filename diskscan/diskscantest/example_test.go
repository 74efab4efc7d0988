package diskscantest_test

import (
	"context"
	"maps"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/diskscan/diskscantest"
)

// A host's ExpectedSource over its own index of replica objects, checked
// in one line. In the host's _test.go file the function below is a
// TestXxx function; an example cannot be handed a *testing.T, so this one
// only compiles.
func ExampleRunConformanceTests() {
	testExpectedSource := func(t *testing.T) {
		diskscantest.RunConformanceTests(t, diskscantest.Harness{
			ExpectedSource: func(*testing.T) (diskscan.ExpectedSource, diskscantest.ExpectFunc) {
				var (
					mu     sync.Mutex
					byUUID = map[string]diskscan.NameSet{} // what the informer's handlers keep
				)
				src := diskscan.ExpectedFunc(func(ctx context.Context, d diskscan.Disk) (diskscan.NameSet, error) {
					mu.Lock()
					defer mu.Unlock()
					return byUUID[d.UUID], nil
				})
				expect := func(_ *testing.T, d diskscan.Disk, name string) {
					mu.Lock()
					defer mu.Unlock()
					set := maps.Clone(byUUID[d.UUID]) // never modify a set handed out
					if set == nil {
						set = diskscan.NameSet{}
					}
					set[name] = struct{}{}
					byUUID[d.UUID] = set
				}
				return src, expect
			},
		})
	}
	_ = testExpectedSource
}
