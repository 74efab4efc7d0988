package s3store

import (
	"strings"

	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
)

func volumePath(v string) string { return lhformat.VolumePath(v) }

func blockFromKey(k string) (string, bool) {
	i := strings.Index(k, "/blocks/")
	if i < 0 {
		return "", false
	}
	return lhformat.BlockFromPath(k[i+len("/blocks/"):])
}
