package s3store

import (
	"fmt"
	"strings"
)

// prefixErr makes *err's text start with "s3store: " (every error an
// exported function returns does), wrapping it when it does not already.
func prefixErr(err *error) {
	if *err != nil && !strings.HasPrefix((*err).Error(), "s3store: ") {
		*err = fmt.Errorf("s3store: %w", *err)
	}
}
