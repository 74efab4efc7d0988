//go:build !unix

package safefile

// oNonblock is 0 where there is no O_NONBLOCK (Windows has no FIFOs in
// the filesystem).
const oNonblock = 0
