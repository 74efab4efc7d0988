//go:build !unix

package fsstore

// oNonblock is 0 where there is no O_NONBLOCK (Windows has no FIFOs in
// the filesystem).
const oNonblock = 0
