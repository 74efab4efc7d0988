// Package settings holds caretaker's one rule for reading setting values
// and its one error type. Every package exports the type as SettingError
// and the sentinel as ErrInvalidSetting, so a host matches a bad orphan,
// backup or rebuild setting the same way.
package settings

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every *Error.
var ErrInvalid = errors.New("invalid setting")

// Space is the white space Trim removes: ASCII only, because values read
// from files and ConfigMaps often end with a newline, while any other
// character is part of the value and makes it unknown.
const Space = " \t\n\r\v\f"

// Trim removes surrounding ASCII white space: the one trim rule for every
// setting value and list item.
func Trim(v string) string { return strings.Trim(v, Space) }

// Error says which setting value was rejected and why.
type Error struct {
	Setting string   // the setting's name
	Value   string   // the whole value, as given
	Item    string   // the offending item of a list, if one item was at fault
	Reason  string   // what is wrong
	Allowed []string // the accepted values, when they are few
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "setting %s=%q", e.Setting, e.Value)
	if e.Item != "" {
		fmt.Fprintf(&b, ": item %q", e.Item)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if len(e.Allowed) > 0 {
		b.WriteString(" (accepted: " + strings.Join(e.Allowed, ", ") + ")")
	}
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }
