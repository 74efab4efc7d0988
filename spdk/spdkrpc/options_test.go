package spdkrpc_test

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// TestNewClientRefusesOptionsItCannotUse: a NUL byte in the socket path
// (the kernel would dial the path cut at it), a path no Unix socket
// address holds, and a negative reply limit are errors naming the option,
// never a client that silently dials another socket or reads without the
// limit the host meant.
func TestNewClientRefusesOptionsItCannotUse(t *testing.T) {
	long := "/var/tmp/" + strings.Repeat("s", 200) + ".sock"
	for _, tc := range []struct {
		name   string
		opts   spdkrpc.ClientOptions
		option string // the option the error must name
	}{
		{"NUL in path", spdkrpc.ClientOptions{SocketPath: "/var/tmp/spdk.sock\x00.other"}, "SocketPath"},
		{"path too long", spdkrpc.ClientOptions{SocketPath: long}, "SocketPath"},
		{"negative reply limit", spdkrpc.ClientOptions{MaxReplySize: -1}, "MaxReplySize"},
	} {
		c, err := spdkrpc.NewClient(tc.opts)
		if c != nil || !errors.Is(err, spdkrpc.ErrInvalidOptions) {
			t.Errorf("%s: NewClient = %v, %v; want nil and ErrInvalidOptions", tc.name, c, err)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "spdkrpc: ") || !strings.Contains(msg, tc.option) {
			t.Errorf("%s: %q does not start with spdkrpc: or name %s", tc.name, msg, tc.option)
		}
	}
}

// TestNewClientTakesEveryUsablePath: the zero options mean the defaults,
// and the longest path a socket address holds is still accepted.
func TestNewClientTakesEveryUsablePath(t *testing.T) {
	c, err := spdkrpc.NewClient(spdkrpc.ClientOptions{})
	if err != nil || c.SocketPath() != spdkrpc.DefaultSocketPath {
		t.Fatalf("zero options: %v, %v", c, err)
	}
	limit := 103
	if runtime.GOOS == "linux" || runtime.GOOS == "windows" {
		limit = 107
	}
	paths := []string{"/" + strings.Repeat("p", limit-1), "relative.sock"}
	if runtime.GOOS == "linux" {
		paths = append(paths, "@"+strings.Repeat("a", 107)) // an abstract name needs no NUL
	}
	for _, p := range paths {
		if c, err := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: p, MaxReplySize: 1}); err != nil || c.SocketPath() != p {
			t.Errorf("%d-byte path: %v, %v", len(p), c, err)
		}
	}
}

// TestSocketPathLimitIsTheKernels: on Linux, the longest path NewClient
// takes is one the kernel can dial (it fails only because nothing
// listens), and one byte more is what the kernel refuses outright.
func TestSocketPathLimitIsTheKernels(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sun_path size checked on Linux")
	}
	for n, wantEINVAL := range map[int]bool{107: false, 108: true} {
		p := "/" + strings.Repeat("p", n-1)
		_, err := net.Dial("unix", p)
		if errors.Is(err, syscall.EINVAL) != wantEINVAL {
			t.Errorf("dial %d-byte path: %v", n, err)
		}
		_, nerr := spdkrpc.NewClient(spdkrpc.ClientOptions{SocketPath: p})
		if (nerr != nil) != wantEINVAL {
			t.Errorf("NewClient of a %d-byte path: %v", n, nerr)
		}
	}
}
