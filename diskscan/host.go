package diskscan

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A node's disks are paths of the host. longhorn-manager runs in a pod and
// reaches them through the host's mount namespace: its disk monitor calls
// ns.GetDiskStat and ns.DeletePath of longhorn/go-common-libs, which run
// the call on a thread that joined the namespaces of /host/proc/1. An
// Orphans can do the same in two ways:
//
//   - Options.HostRoot and Options.HostMountInfo: every disk path is
//     resolved inside HostRoot (say /host/proc/1/root) as if it were "/",
//     symbolic links and ".." included, and mount points are judged from
//     that process's mount table (say /host/proc/1/mountinfo), whose paths
//     are relative to that same root. No thread joins anything.
//   - Options.Sequential on a thread the caller locked and moved into the
//     host's mount namespace: all work then runs on that thread, and the
//     mount table read is that thread's own (/proc/thread-self/mountinfo).

// ErrHostRoot is wrapped by NewOrphans's refusal of Options.HostRoot or
// Options.HostMountInfo, and by the errors of disks that cannot be reached
// through the host root (a kernel without openat2, a host root that is not
// a directory).
var ErrHostRoot = errors.New("diskscan: host root unusable")

// ownMountInfo is the mount table of the calling thread's mount namespace.
// A thread that joined another mount namespace (setns(2) on a locked OS
// thread) sees that namespace's table here, while /proc/self/mountinfo
// shows the thread group leader's. The fallback is for kernels before 3.17.
const (
	ownMountInfo         = "/proc/thread-self/mountinfo"
	ownMountInfoFallback = "/proc/self/mountinfo"
)

// hostTree is where disk paths are resolved and which mount table judges
// them: this process's own (the zero value) or a host root's.
type hostTree struct {
	root      string // "" means this process's root
	mountInfo string // the mount table of root's process; "" with root ""
}

// newHostTree checks Options.HostRoot and Options.HostMountInfo.
func newHostTree(root, mountInfo string) (hostTree, error) {
	if root == "" && mountInfo == "" {
		return hostTree{}, nil
	}
	for _, p := range []struct{ name, v string }{{"HostRoot", root}, {"HostMountInfo", mountInfo}} {
		switch {
		case p.v == "":
			return hostTree{}, fmt.Errorf("%w: HostRoot and HostMountInfo go together (for example /host/proc/1/root and /host/proc/1/mountinfo); %s is empty", ErrHostRoot, p.name)
		case !filepath.IsAbs(p.v):
			return hostTree{}, fmt.Errorf("%w: %s %q is not absolute", ErrHostRoot, p.name, p.v)
		case strings.ContainsRune(p.v, 0):
			return hostTree{}, fmt.Errorf("%w: %s %q contains a NUL byte", ErrHostRoot, p.name, p.v)
		}
	}
	if err := hostRootSupported(); err != nil {
		return hostTree{}, fmt.Errorf("%w: %v", ErrHostRoot, err)
	}
	return hostTree{root: filepath.Clean(root), mountInfo: filepath.Clean(mountInfo)}, nil
}

// fsid returns the filesystem ID of the disk directory at path.
func (h hostTree) fsid(path string) (string, error) {
	root, err := h.openRoot(path)
	if err != nil {
		return "", err
	}
	defer root.Close()
	self, err := root.Open(".")
	if err != nil {
		return "", err
	}
	defer self.Close()
	return fsidOf(self)
}

// pathOf returns the path of the open directory f as the mount table that
// judges it names it: relative to this process's root, or to the host
// root. The kernel names a file of another mount namespace by its path
// from that namespace's root, and the host root itself then as "/"; a
// host root inside this namespace (a directory standing for one) is a
// prefix cut off here. A directory outside the host root is an error.
func (h hostTree) pathOf(f *os.File) (string, error) {
	p, err := pathOf(f)
	if err != nil || h.root == "" {
		return p, err
	}
	hr, err := os.Open(h.root)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrHostRoot, err)
	}
	defer hr.Close()
	base, err := pathOf(hr)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrHostRoot, err)
	}
	switch {
	case base == "/":
		return p, nil
	case p == base:
		return "/", nil
	case strings.HasPrefix(p, base+"/"):
		return p[len(base):], nil
	}
	return "", fmt.Errorf("%w: %s is not inside the host root %s (%s)", ErrHostRoot, p, h.root, base)
}

// mountTable returns the path of the mount table and whether a missing
// table may fall back to /proc/self/mountinfo.
func (h hostTree) mountTable() (string, bool) {
	if h.root != "" {
		return h.mountInfo, false
	}
	return ownMountInfo, true
}
