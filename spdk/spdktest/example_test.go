package spdktest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
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
	ok := runTest(func(t *testing.T) { spdktest.RunConformanceTests(t, harness) })
	fmt.Println("conformant:", ok)
	// Output: conformant: true
}

// runTest runs f as a test and reports whether it passed. The test's own
// progress lines (go test -v prints them) go to the null device, so the
// example's output is the same with and without -v.
func runTest(f func(t *testing.T)) bool {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	defer null.Close()
	stdout := os.Stdout
	os.Stdout = null
	defer func() { os.Stdout = stdout }()
	return testing.RunTests(func(_, _ string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "TestMyCaller", F: f}})
}
