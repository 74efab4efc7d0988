// Package logrecord is a slog.Handler that keeps the records it is given in
// memory, for the tests of the drivers' logging: a test builds
// slog.New(h), hands it to a driver, and asks h which records appeared
// with which attributes. Only tests import it.
package logrecord

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Entry is one logged record, its attributes flattened to strings (groups
// joined with dots) so that tests compare them directly.
type Entry struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// String renders the entry for failure messages.
func (e Entry) String() string {
	return fmt.Sprintf("%s %q %v", e.Level, e.Message, e.Attrs)
}

// Handler records every record at or above Level. Create it with New. It
// is safe for concurrent use; loggers derived with With share its records.
type Handler struct {
	Level slog.Level

	shared *store
	attrs  []slog.Attr
	group  string
}

type store struct {
	mu      sync.Mutex
	entries []Entry
}

// New returns a Handler that records from level up.
func New(level slog.Level) *Handler { return &Handler{Level: level, shared: &store{}} }

// Enabled reports whether level is recorded.
func (h *Handler) Enabled(_ context.Context, level slog.Level) bool { return level >= h.Level }

// Handle records r.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	e := Entry{Level: r.Level, Message: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		flatten(e.Attrs, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		flatten(e.Attrs, h.group, a)
		return true
	})
	h.store().mu.Lock()
	h.store().entries = append(h.store().entries, e)
	h.store().mu.Unlock()
	return nil
}

// WithAttrs returns a handler that adds attrs to every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.shared = h.store()
	for _, a := range attrs {
		if h.group != "" {
			a.Key = h.group + a.Key
		}
		c.attrs = append(c.attrs[:len(c.attrs):len(c.attrs)], a)
	}
	return &c
}

// WithGroup returns a handler that qualifies later attributes with name.
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	c.shared = h.store()
	if name != "" {
		c.group = h.group + name + "."
	}
	return &c
}

// Entries returns a copy of what was recorded so far, in order.
func (h *Handler) Entries() []Entry {
	s := h.store()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.entries...)
}

// Find returns the entries at level whose message is msg and whose
// attributes include every key/value pair of want (values compared as
// strings, as the entry holds them).
func (h *Handler) Find(level slog.Level, msg string, want map[string]string) []Entry {
	var found []Entry
	for _, e := range h.Entries() {
		if e.Level != level || e.Message != msg {
			continue
		}
		ok := true
		for k, v := range want {
			if got, has := e.Attrs[k]; !has || got != v {
				ok = false
				break
			}
		}
		if ok {
			found = append(found, e)
		}
	}
	return found
}

// Dump renders every entry, one a line, for failure messages.
func (h *Handler) Dump() string {
	var b strings.Builder
	for _, e := range h.Entries() {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func (h *Handler) store() *store { return h.shared }

func flatten(into map[string]string, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p = prefix + a.Key + "."
		}
		for _, g := range v.Group() {
			flatten(into, p, g)
		}
		return
	}
	into[prefix+a.Key] = v.String()
}

// Want fails t unless exactly n entries at level with msg and the
// attributes of want were recorded, and returns them.
func (h *Handler) Want(t testing.TB, n int, level slog.Level, msg string, want map[string]string) []Entry {
	t.Helper()
	got := h.Find(level, msg, want)
	if len(got) != n {
		t.Fatalf("%d %s %q with %v logged, want %d; log:\n%s", len(got), level, msg, want, n, h.Dump())
	}
	return got
}
