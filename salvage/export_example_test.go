//go:build linux

package salvage_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/caretaker-storage/caretaker/salvage"
)

// ExampleExportChain exports a two-layer replica directory to a sparse
// image file: the head's block hides the snapshot's, the rest of the
// snapshot shows through, and the image ends as a 1 MiB file with two
// blocks of data.
func ExampleExportChain() {
	tmp, err := os.MkdirTemp("", "salvage-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)

	// A replica directory: a snapshot with 8 KiB of data ending in 'S', a
	// head that rewrote the first 4 KiB (ending in 'H'). Both files are
	// 1 MiB and sparse.
	dir := filepath.Join(tmp, "pvc-0123-abcdef12")
	write := func(name string, data []byte) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(1 << 20); err != nil {
			log.Fatal(err)
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		log.Fatal(err)
	}
	write("volume-snap-s1.img", []byte(fmt.Sprintf("%08192s", "S")))
	write("volume-head-001.img", []byte(fmt.Sprintf("%04096s", "H")))

	chain := salvage.Chain{Size: 1 << 20, Layers: []string{"volume-head-001.img", "volume-snap-s1.img"}}
	out, err := os.Create(filepath.Join(tmp, "volume.raw"))
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	res, err := salvage.ExportChain(context.Background(), dir, chain, out, salvage.ExportOptions{})
	if err != nil {
		log.Fatal(err)
	}
	img, err := os.ReadFile(out.Name())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes, %d written, block 0 ends %q, block 1 ends %q\n", res.Size, res.WrittenBytes, img[4095], img[8191])
	fmt.Printf("sha256 %x\n", res.SHA256)
	// Output:
	// 1048576 bytes, 8192 written, block 0 ends 'H', block 1 ends 'S'
	// sha256 95876d3c13f5a3365ca6976a26d47fc490170bf2c4062230300f3b50e680a7fc
}
