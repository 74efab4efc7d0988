package spdktest_test

import (
	"fmt"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"

	"github.com/caretaker-storage/caretaker/internal/testrun"
)

// ExampleRunConformanceTests runs the Caller suite against spdk.Client,
// as a host would against a Caller of its own.
func ExampleRunConformanceTests() {
	harness := spdktest.Harness{
		Caller: func(t *testing.T, opts spdk.ClientOptions) spdk.Caller {
			c := spdk.NewClient(opts)
			t.Cleanup(func() { c.Close() })
			return c
		},
	}
	ok := testrun.Passes("TestHost", func(t *testing.T) { spdktest.RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}
