package fsstore

import (
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/internal/bounded"
)

// ErrTooLarge is wrapped by the error of a read that went over its limit
// (Options.MaxConfigBytes for a cfg, a few KiB for a lock file); the same
// value as every other caretaker package's ErrTooLarge. Such an error
// wraps a *bounded.TooLargeError naming the file and the limit, and also
// backupdelete.ErrCorrupt: an oversized cfg is a corrupt one, and nothing
// is deleted because of it.
var ErrTooLarge = bounded.ErrTooLarge

// readBounded reads a regular file of at most limit bytes.
func readBounded(root *os.Root, name string, limit int64) ([]byte, fs.FileInfo, error) {
	return readBoundedInto(root, name, limit, nil)
}

// readBoundedInto is readBounded into buf's storage when it is large
// enough (the result then aliases buf): a deletion scans every remaining
// cfg of a volume, tens of MB each, and reuses one buffer per scanner.
func readBoundedInto(root *os.Root, name string, limit int64, buf []byte) ([]byte, fs.FileInfo, error) {
	f, info, err := openRegular(root, name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if info.Size() > limit {
		return nil, nil, wrapTooLarge(&bounded.TooLargeError{What: name, Limit: limit})
	}
	// Read into a buffer of the file's size, as os.ReadFile does, rather
	// than letting io.ReadAll double its way up through a 50 MiB cfg. The
	// bounded.Reader catches a file that grows while it is read.
	data := buf[:0]
	if int64(cap(data)) < info.Size()+512 {
		data = make([]byte, 0, info.Size()+512)
	}
	r := bounded.Reader{R: f, Limit: limit, What: name}
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, info, nil
		}
		if err != nil {
			return nil, nil, wrapTooLarge(err)
		}
	}
}

// wrapTooLarge adds backupdelete.ErrCorrupt to a *bounded.TooLargeError
// and leaves other errors alone.
func wrapTooLarge(err error) error {
	if _, ok := err.(*bounded.TooLargeError); ok {
		return fmt.Errorf("%w: %w", backupdelete.ErrCorrupt, err)
	}
	return err
}
