package tokenringtest_test

import (
	"errors"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/testrun"
	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// TestMemNodeConformance: the in-memory node honours every contract.
func TestMemNodeConformance(t *testing.T) {
	tokenringtest.RunConformanceTests(t, tokenringtest.Harness{
		RingSource: func(_ *testing.T, c tokenringtest.Cluster) tokenring.RingSource {
			return tokenringtest.NewMemNode(c)
		},
		LocationSource: func(_ *testing.T, c tokenringtest.Cluster) tokenring.LocationSource {
			return tokenringtest.NewMemNode(c)
		},
		Cleaner: func(_ *testing.T, c tokenringtest.Cluster) tokenringtest.CleanerHarness {
			n := tokenringtest.NewMemNode(c)
			return tokenringtest.CleanerHarness{
				Cleaner:     n,
				Cleaned:     n.Cleaned,
				StopCalls:   n.StopCalls,
				FailCleanup: func(ks string) { n.FailCleanup(ks, errors.New("compaction failed")) },
			}
		},
	})
}

// TestEmptyHarnessFails: a Harness without makers would check nothing,
// and must say so rather than pass.
func TestEmptyHarnessFails(t *testing.T) {
	if testrun.Passes("TestHost", func(t *testing.T) { tokenringtest.RunConformanceTests(t, tokenringtest.Harness{}) }) {
		t.Fatal("RunConformanceTests with an empty Harness passed")
	}
}
