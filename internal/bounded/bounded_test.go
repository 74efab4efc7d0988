package bounded

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadAll(t *testing.T) {
	data, err := ReadAll(strings.NewReader("12345"), 5, "x")
	if err != nil || string(data) != "12345" {
		t.Fatalf("at the limit: %q, %v", data, err)
	}
	_, err = ReadAll(strings.NewReader("123456"), 5, "volume.meta")
	var tl *TooLargeError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &tl) || tl.What != "volume.meta" || tl.Limit != 5 {
		t.Fatalf("over the limit: %v", err)
	}
	if !strings.Contains(err.Error(), "volume.meta") {
		t.Fatalf("the error does not name its input: %v", err)
	}
}

func TestReaderStopsPastTheLimit(t *testing.T) {
	r := &Reader{R: strings.NewReader(strings.Repeat("a", 100)), Limit: 10, What: "reply"}
	got, err := io.ReadAll(r)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if len(got) > 11 {
		t.Fatalf("read %d bytes past a limit of 10", len(got))
	}
	r = &Reader{R: strings.NewReader("abc"), Limit: 10}
	if got, err := io.ReadAll(r); err != nil || string(got) != "abc" || r.Count() != 3 {
		t.Fatalf("under the limit: %q %v %d", got, err, r.Count())
	}
	r.Reset(0)
	if r.Count() != 0 {
		t.Fatal("Reset did not reset")
	}
}
