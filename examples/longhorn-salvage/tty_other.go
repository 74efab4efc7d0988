//go:build !linux

package main

import "os"

// isTerminal guesses from the file type where TCGETS is not at hand.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
