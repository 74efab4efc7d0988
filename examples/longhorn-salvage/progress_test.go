package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestProgressOnlyOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	if p := newProgress(&buf); p.on {
		t.Error("a bar on a buffer")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if p := newProgress(null); p.on {
		t.Error("a bar on /dev/null (a character device, not a terminal)")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := newProgress(f); p.on {
		t.Error("a bar on a file")
	}
	if pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0); err == nil {
		defer pty.Close()
		if p := newProgress(pty); !p.on {
			t.Error("no bar on a terminal")
		}
	}

	p := &progress{w: &buf, on: true, last: -1}
	p.update(0, 4<<20)
	p.update(1, 4<<20) // same percent: not drawn again
	p.update(2<<20, 4<<20)
	p.update(4<<20, 4<<20)
	p.finish()
	out := buf.String()
	if strings.Count(out, "\r") != 3 || !strings.Contains(out, " 50% 2.0 MiB / 4.0 MiB") || !strings.HasSuffix(out, "100% 4.0 MiB / 4.0 MiB\n") {
		t.Errorf("bar output %q", out)
	}
}
