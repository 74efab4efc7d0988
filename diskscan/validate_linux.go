//go:build linux && (amd64 || arm64)

package diskscan

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/caretaker-storage/caretaker/internal/bounded"
)

// Validating through descriptors. Going through the os.Root, a
// validation costs about fifteen system calls and a dozen allocations:
// the root re-walks "<name>/volume.meta" component by component, every
// open file is an *os.File registered with the poller, and fs.WalkDir
// stats the directory again, lstat's every entry while listing it and
// sorts them. validateAt opens the directory once, relative to a
// descriptor of <disk>/replicas, and does everything else relative to
// that: about ten system calls, no *os.File.
//
// It keeps every check of the root path, and is stricter in one way:
//
//   - the directory is opened with O_NOFOLLOW|O_DIRECTORY|O_NONBLOCK, so
//     a symbolic link, a FIFO, a device or a file in its place is
//     refused by the kernel before anything is opened ("not a
//     directory", as lstat finds);
//   - its identity (device, inode, times) is fstat'ed on the open
//     directory, and volume.meta and the size walk are read inside that
//     very directory: a directory swapped after the identity was taken
//     cannot lend its volume.meta or its size (the root path lstat's the
//     name, then resolves it again for each later step);
//   - volume.meta is lstat'ed (fstatat, AT_SYMLINK_NOFOLLOW) before it is
//     opened, so a FIFO, socket or device is never opened; the open is
//     O_NOFOLLOW|O_NONBLOCK, and the open file must be the regular file
//     lstat saw (fstat: type, device, inode), else it was swapped;
//   - at most the size limit plus one byte is read;
//   - the walk summing the size never follows a symbolic link, opens
//     only directories (O_DIRECTORY|O_NOFOLLOW|O_NONBLOCK), each once
//     relative to its parent's descriptor, never enters another device
//     or mount, is bounded in depth and entries, and checks ctx at every
//     entry (see sizeWalk).
//
// Whatever it cannot tell (a permission error on the directory, an
// unexpected error) it leaves to validateRoot, so the reasons reported
// are the root path's.

// validateBufs are one validation worker's buffers, reused from one
// directory to the next.
type validateBufs struct {
	meta  []byte // volume.meta's bytes
	dents []byte // getdents64 records
	// metaStat is the fstat of the volume.meta just read (zero if none):
	// the walk counts that inode's blocks from it instead of an lstat.
	metaStat syscall.Stat_t
}

// validationFd returns a duplicate of dir's descriptor for validateAt,
// or -1 if there is none.
func validationFd(dir *os.File) int {
	fd, err := dupFd(dir)
	if err != nil {
		return -1
	}
	return int(fd)
}

// closeValidationFd closes what validationFd returned.
func closeValidationFd(fd int) {
	if fd >= 0 {
		syscall.Close(fd)
	}
}

// atSymlinkNofollow is AT_SYMLINK_NOFOLLOW (the same on every Linux
// architecture), which package syscall does not export.
const atSymlinkNofollow = 0x100

const (
	openDirFlags  = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	openFileFlags = syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
)

// openat is openat(2), retried on EINTR.
func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// fstat is fstat(2), retried on EINTR.
func fstat(fd int, st *syscall.Stat_t) error {
	for {
		if err := syscall.Fstat(fd, st); err != syscall.EINTR {
			return err
		}
	}
}

// statIdentity is identityOf for a raw stat.
func statIdentity(st *syscall.Stat_t) dirIdentity {
	return dirIdentity{
		dev:   uint64(st.Dev),
		ino:   st.Ino,
		mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
	}
}

// statType is the file type of a raw stat's mode, as os reports it.
func statType(mode uint32) fs.FileMode {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return 0
	case syscall.S_IFDIR:
		return fs.ModeDir
	case syscall.S_IFLNK:
		return fs.ModeSymlink
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// validateAt validates the unexpected directory name as validateRoot
// does, through descriptors relative to dirfd (a descriptor of the
// directory rr holds). ok is false when it cannot tell, and then it has
// read nothing: the caller asks validateRoot.
func (o *Orphans) validateAt(ctx context.Context, rr *os.Root, dirfd int, b *validateBufs, prev *cachedEntry, name string) (v validation, ok bool) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return validation{}, false // never one component: not ours to open
	}
	if prev != nil {
		// A rescan: one lstat tells whether the cached validation stands,
		// as on the root path; only a changed directory is opened.
		var st syscall.Stat_t
		switch err := fstatat(dirfd, name, &st, atSymlinkNofollow); {
		case err == syscall.ENOENT:
			return validation{}, true // vanished since the listing
		case err != nil:
			return validation{}, false
		case statType(st.Mode) != fs.ModeDir:
			return validation{present: true, entry: &cachedEntry{reason: "not a directory"}}, true
		case statIdentity(&st) == prev.id:
			return validation{present: true, entry: prev}, true
		}
	}
	fd, err := openat(dirfd, name, openDirFlags)
	switch err {
	case nil:
	case syscall.ENOENT:
		return validation{}, true // vanished since the listing
	case syscall.ENOTDIR, syscall.ELOOP:
		// Not a directory, or a symbolic link (never followed).
		return validation{present: true, entry: &cachedEntry{reason: "not a directory"}}, true
	default:
		return validation{}, false
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		return validation{}, false
	}
	id := statIdentity(&st)
	if prev != nil && prev.id == id {
		return validation{present: true, entry: prev}, true
	}
	o.metaReads.Add(1)
	b.metaStat = syscall.Stat_t{}
	meta, err := b.readMeta(fd, orDefault(o.opts.MaxMetaSize, DefaultMaxMetaSize))
	return o.validated(ctx, id, meta, err, func(w *sizeWalk) {
		b.allocatedIn(w, &fdBoundary{topfd: fd, dev: uint64(st.Dev)}, fd, 0)
	}), true
}

// readMeta reads and parses volume.meta inside the directory dirfd; it
// must be a regular file, and is never opened otherwise. Its errors are
// readMeta's (the root path's) for the same findings.
func (b *validateBufs) readMeta(dirfd int, limit int64) (VolumeMeta, error) {
	pathErr := func(op string, err error) error { return &os.PathError{Op: op, Path: MetaFile, Err: err} }
	var before syscall.Stat_t
	if err := fstatat(dirfd, MetaFile, &before, atSymlinkNofollow); err != nil {
		return VolumeMeta{}, pathErr("lstat", err)
	}
	if t := statType(before.Mode); t != 0 {
		return VolumeMeta{}, notRegular(MetaFile, t)
	}
	fd, err := openat(dirfd, MetaFile, openFileFlags)
	switch err {
	case nil:
	case syscall.ELOOP: // a symbolic link since the lstat
		return VolumeMeta{}, swapped()
	default:
		return VolumeMeta{}, pathErr("open", err)
	}
	defer syscall.Close(fd)
	var after syscall.Stat_t
	if err := fstat(fd, &after); err != nil {
		return VolumeMeta{}, pathErr("stat", err)
	}
	if statType(after.Mode) != 0 || after.Dev != before.Dev || after.Ino != before.Ino {
		return VolumeMeta{}, swapped()
	}
	b.metaStat = after
	// Read to the end, at most limit+1 bytes: one more than the limit
	// tells the file is too large, as bounded.ReadAll does.
	data := b.meta[:0]
	for {
		if len(data) == cap(data) {
			if int64(len(data)) > limit {
				break
			}
			grown := make([]byte, len(data), int(min(max(2*int64(cap(data)), 4096), limit+1)))
			copy(grown, data)
			data = grown
		}
		n, err := syscall.Read(fd, data[len(data):cap(data)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			b.meta = data[:0]
			return VolumeMeta{}, fmt.Errorf("read %s: %w", MetaFile, pathErr("read", err))
		}
		if n <= 0 {
			break
		}
		data = data[:len(data)+n]
		if int64(len(data)) == after.Size && len(data) < cap(data) {
			// All the bytes the open file held: the read that would
			// return 0 is saved. (The engine replaces volume.meta by a
			// rename, never in place; a file growing meanwhile is a race
			// that reading to the end would lose just the same.)
			break
		}
	}
	b.meta = data[:0]
	if int64(len(data)) > limit {
		return VolumeMeta{}, tooLarge(&bounded.TooLargeError{What: MetaFile, Limit: limit})
	}
	return ParseVolumeMeta(data)
}

// swapped is the error of a volume.meta replaced between its lstat and
// its open, as openRegular says it.
func swapped() error {
	return &ParseError{Input: MetaFile, Reason: "replaced by another file while being opened", Err: ErrNotRegular}
}

// fdBoundary is the device and mount a descriptor walk stays in: those
// of the directory validated. Its mount ID is read only when the walk
// first meets a subdirectory (a replica directory has none).
type fdBoundary struct {
	topfd   int
	dev     uint64
	mnt     uint64 // 0 if not read yet, or unreadable (no /proc)
	mntRead bool
}

// inside reports whether the directory fd is on the boundary's device and
// in its mount. Without /proc only the device is compared.
func (fb *fdBoundary) inside(fd int) bool {
	var st syscall.Stat_t
	if fstat(fd, &st) != nil || statType(st.Mode) != fs.ModeDir || uint64(st.Dev) != fb.dev {
		return false
	}
	if !fb.mntRead {
		fb.mntRead = true
		fb.mnt, _ = mountOfFd(fb.topfd)
	}
	if fb.mnt == 0 {
		return true
	}
	mnt, err := mountOfFd(fd)
	return err == nil && mnt == fb.mnt
}

// allocatedIn adds to w the allocated bytes of the regular files under the
// directory dirfd, depth levels below the directory validated: the size
// walk through descriptors (see sizeWalk for its bounds). Each
// subdirectory is opened once, relative to its parent's descriptor, with
// O_DIRECTORY|O_NOFOLLOW|O_NONBLOCK, and entered only if it is inside fb;
// a symbolic link is never followed, nothing but a directory is opened,
// and at most MaxWalkDepth+1 descriptors are held.
func (b *validateBufs) allocatedIn(w *sizeWalk, fb *fdBoundary, dirfd int, depth int) {
	if b.dents == nil {
		b.dents = make([]byte, 8<<10)
	}
	var (
		subs []string
		st   syscall.Stat_t
	)
	for !w.stopped() {
		n, err := syscall.Getdents(dirfd, b.dents)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		for off := 0; off < n; {
			const header = 19 // ino 8, off 8, reclen 2, type 1
			if off+header > n {
				break
			}
			reclen := int(binary.NativeEndian.Uint16(b.dents[off+16:]))
			if reclen <= header || off+reclen > n {
				break
			}
			typ := b.dents[off+18]
			raw := b.dents[off+header : off+reclen]
			off += reclen
			for i, c := range raw {
				if c == 0 {
					raw = raw[:i]
					break
				}
			}
			if len(raw) == 0 || string(raw) == "." || string(raw) == ".." {
				continue
			}
			if !w.entry() {
				return
			}
			switch typ {
			case syscall.DT_DIR:
				subs = append(subs, string(raw))
			case syscall.DT_REG, syscall.DT_UNKNOWN:
				ino := binary.NativeEndian.Uint64(b.dents[off-reclen:])
				if depth == 0 && ino != 0 && ino == b.metaStat.Ino && string(raw) == MetaFile {
					w.bytes += b.metaStat.Blocks * 512 // the volume.meta just read and fstat'ed
					continue
				}
				if fstatat(dirfd, string(raw), &st, atSymlinkNofollow) != nil {
					continue
				}
				switch statType(st.Mode) {
				case 0:
					w.bytes += st.Blocks * 512
				case fs.ModeDir:
					subs = append(subs, string(raw))
				}
			}
		}
	}
	// Subdirectories after the listing: their walks reuse b.dents.
	for _, sub := range subs {
		if !w.subdir(depth + 1) {
			return
		}
		fd, err := openat(dirfd, sub, openDirFlags)
		if err != nil {
			continue // gone, or no longer a directory: never followed
		}
		w.opens++
		if fb.inside(fd) {
			b.allocatedIn(w, fb, fd, depth+1)
		}
		syscall.Close(fd)
	}
}
