package nodecache_test

import (
	"testing"

	"github.com/caretaker-storage/caretaker/examples/kube/internal/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }
