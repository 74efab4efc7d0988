package logrecord_test

import (
	"log/slog"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/logrecord"
)

func TestHandlerRecordsLevelsAttrsAndGroups(t *testing.T) {
	h := logrecord.New(slog.LevelInfo)
	log := slog.New(h)
	log.Debug("hidden")
	log.With("node", "n1").WithGroup("g").Warn("seen", "reason", "why", slog.Group("sub", "k", 2))
	got := h.Entries()
	if len(got) != 1 {
		t.Fatalf("entries %v, want one (Debug is below the level)", got)
	}
	if n := len(h.Find(slog.LevelWarn, "seen", map[string]string{"node": "n1", "g.reason": "why", "g.sub.k": "2"})); n != 1 {
		t.Fatalf("Find = %d; entry %v", n, got[0])
	}
	if n := len(h.Find(slog.LevelWarn, "seen", map[string]string{"node": "n2"})); n != 0 {
		t.Fatalf("Find matched a wrong value")
	}
}
