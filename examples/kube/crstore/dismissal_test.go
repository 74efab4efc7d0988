package crstore

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/caretaker-storage/caretaker/orphan"
)

// A person who writes the dismissal label as True, TRUE, 1 or yes gets
// the dismissal they meant; only a clear no leaves auto-deletion on.
func TestDismissalLabelSpellings(t *testing.T) {
	for _, c := range []struct {
		value   string
		present bool
		want    bool
	}{
		{"true", true, true}, {"True", true, true}, {"TRUE", true, true}, {"1", true, true},
		{"yes", true, true}, {"dismissed", true, true},
		{"false", true, false}, {"False", true, false}, {"0", true, false}, {"", true, false}, {"", false, false},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "orphan-x"},
			"spec":     map[string]any{"nodeID": "n1", "orphanType": "replica", "dataEngine": "v1"},
		}}
		if c.present {
			u.SetLabels(map[string]string{orphan.LabelDismissed: c.value})
		}
		r, err := RecordOf(u)
		if err != nil {
			t.Fatal(err)
		}
		if r.Dismissed != c.want || Dismissed(u.GetLabels()) != c.want {
			t.Errorf("label %q (present %v): Dismissed = %v, want %v", c.value, c.present, r.Dismissed, c.want)
		}
	}
}

// An unknown spelling is logged, once per Orphan and value; known ones
// are not.
func TestDismissalLogOncePerValue(t *testing.T) {
	var buf bytes.Buffer
	l := &DismissalLog{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	l.Check("a", map[string]string{orphan.LabelDismissed: "dismiss-it"})
	l.Check("a", map[string]string{orphan.LabelDismissed: "dismiss-it"})
	l.Check("a", map[string]string{orphan.LabelDismissed: "TRUE"})
	l.Check("b", map[string]string{orphan.LabelDismissed: "false"})
	l.Check("b", nil)
	if n := strings.Count(buf.String(), "unknown value"); n != 1 || !strings.Contains(buf.String(), "value=dismiss-it") {
		t.Fatalf("logged %d lines, want 1 for orphan a:\n%s", n, buf.String())
	}
	l.Check("a", map[string]string{orphan.LabelDismissed: "nope!"})
	if n := strings.Count(buf.String(), "unknown value"); n != 2 {
		t.Fatalf("a new unknown value was not logged:\n%s", buf.String())
	}
	var silent *DismissalLog
	silent.Check("a", map[string]string{orphan.LabelDismissed: "x"}) // must not panic
}
