package diskscan

import (
	"bytes"
	"fmt"
	"strings"
)

// parseMountInfo returns the mount points of a /proc/self/mountinfo: the
// fifth field of each line, with the kernel's octal escapes (\040 for a
// space, \011, \012, \134) decoded. A line with fewer fields is an error:
// a table that cannot be read whole proves nothing.
func parseMountInfo(data []byte) ([]string, error) {
	var points []string
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		fields := strings.Fields(string(line))
		if len(fields) < 5 {
			return nil, corrupt("mountinfo", "line %d has %d fields", i+1, len(fields))
		}
		p, err := unescapeMountPath(fields[4])
		if err != nil {
			return nil, corrupt("mountinfo", "line %d: %v", i+1, err)
		}
		points = append(points, p)
	}
	return points, nil
}

// unescapeMountPath decodes the kernel's \ooo escapes in a mount path.
func unescapeMountPath(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("truncated escape in %q", s)
		}
		v := 0
		for _, c := range []byte(s[i+1 : i+4]) {
			if c < '0' || c > '7' {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			v = v*8 + int(c-'0')
		}
		if v > 0xff {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}
