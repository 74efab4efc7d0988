package fsstore

import (
	"fmt"
	"strings"
)

// prefixErr makes *err's text start with "fsstore: " (every error an
// exported function returns does), wrapping it when it does not already.
func prefixErr(err *error) {
	if *err != nil && !strings.HasPrefix((*err).Error(), "fsstore: ") {
		*err = fmt.Errorf("fsstore: %w", *err)
	}
}
