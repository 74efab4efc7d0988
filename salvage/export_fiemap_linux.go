package salvage

import (
	"syscall"
	"unsafe"
)

// The FIEMAP ioctl (linux/fiemap.h, linux/fs.h), the call longhorn-engine
// makes through rancher/go-fibmap's Fiemap (pkg/replica/diff_disk.go
// diffDisk.lookup; pkg/replica/extents.go for the whole-file walk of
// Preload), and longhorn/sparse-tools through sparse/fiemap.go: the same
// request, with FIEMAP_FLAG_SYNC so that delayed allocations are mapped.
const (
	exportFSIocFiemap      = 0xC020660B // _IOWR('f', 11, struct fiemap)
	exportFiemapFlagSync   = 0x0001
	exportFiemapExtentLast = 0x0001
	exportFiemapBatch      = 128 // extents asked for per call
)

// exportFiemapHeader is struct fiemap without its flexible array.
type exportFiemapHeader struct {
	Start         uint64
	Length        uint64
	Flags         uint32
	MappedExtents uint32
	ExtentCount   uint32
	Reserved      uint32
}

// exportFiemapExtent is struct fiemap_extent.
type exportFiemapExtent struct {
	Logical    uint64
	Physical   uint64
	Length     uint64
	Reserved64 [2]uint64
	Flags      uint32
	Reserved   [3]uint32
}

// exportFiemapRequest is a struct fiemap with room for a batch of extents;
// Go lays it out as C does (32-byte header, 56-byte extents, 8-aligned).
type exportFiemapRequest struct {
	hdr exportFiemapHeader
	ext [exportFiemapBatch]exportFiemapExtent
}

// exportFiemap maps [start, start+length) of fd, at most a batch of
// extents, into req and returns them. The errno is EOPNOTSUPP (or ENOTTY)
// when the filesystem has no FIEMAP.
func exportFiemap(fd uintptr, start, length uint64, req *exportFiemapRequest) ([]exportFiemapExtent, syscall.Errno) {
	req.hdr = exportFiemapHeader{Start: start, Length: length, Flags: exportFiemapFlagSync, ExtentCount: exportFiemapBatch}
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, exportFSIocFiemap, uintptr(unsafe.Pointer(req)))
	if errno != 0 {
		return nil, errno
	}
	n := min(int(req.hdr.MappedExtents), exportFiemapBatch)
	return req.ext[:n], 0
}
