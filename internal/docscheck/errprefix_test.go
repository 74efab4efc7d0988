package docscheck

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/diskscan"
	"github.com/caretaker-storage/caretaker/internal/bounded"
	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/internal/settings"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/rebuild"
	"github.com/caretaker-storage/caretaker/salvage"
	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/mgmtapi"
)

// sentinels are the exported error values of each package, by directory
// and name. TestSentinelsCarryTheirPackagePrefix finds the names in the
// source, so a sentinel added to a package without an entry here fails
// the test until it is listed (and its text checked).
var sentinels = map[string]map[string]error{
	"orphan": {
		"ErrAlreadyExists": orphan.ErrAlreadyExists, "ErrConflict": orphan.ErrConflict, "ErrIncomplete": orphan.ErrIncomplete,
		"ErrInvalidItem": orphan.ErrInvalidItem, "ErrInvalidSetting": orphan.ErrInvalidSetting, "ErrMonitorStarted": orphan.ErrMonitorStarted,
		"ErrNoAdapter": orphan.ErrNoAdapter, "ErrNotFound": orphan.ErrNotFound, "ErrPreconditionFailed": orphan.ErrPreconditionFailed,
		"ErrRefused": orphan.ErrRefused,
	},
	"diskscan": {
		"ErrChanged": diskscan.ErrChanged, "ErrCorrupt": diskscan.ErrCorrupt, "ErrDiskChanged": diskscan.ErrDiskChanged,
		"ErrDiskInvalid": diskscan.ErrDiskInvalid, "ErrForeignTombstone": diskscan.ErrForeignTombstone, "ErrHostRoot": diskscan.ErrHostRoot,
		"ErrMountPoint": diskscan.ErrMountPoint, "ErrNoExpectedSource": diskscan.ErrNoExpectedSource, "ErrNoneExpected": diskscan.ErrNoneExpected,
		"ErrNotRegular": diskscan.ErrNotRegular, "ErrNotReplica": diskscan.ErrNotReplica, "ErrStillExpected": diskscan.ErrStillExpected,
		"ErrTooLarge": diskscan.ErrTooLarge, "ErrUnknownDisk": diskscan.ErrUnknownDisk, "ErrUnsafePath": diskscan.ErrUnsafePath,
		"ErrNotLoaded": diskscan.ErrNotLoaded,
	},
	"salvage": {
		"ErrCorrupt": salvage.ErrCorrupt, "ErrDataAppeared": salvage.ErrDataAppeared, "ErrExportBadChain": salvage.ErrExportBadChain,
		"ErrExportChanged": salvage.ErrExportChanged, "ErrExportNoFiemap": salvage.ErrExportNoFiemap, "ErrExportNotRegular": salvage.ErrExportNotRegular,
		"ErrExportQcow2": salvage.ErrExportQcow2, "ErrExportUnsupported": salvage.ErrExportUnsupported, "ErrNotRecoverable": salvage.ErrNotRecoverable,
		"ErrQcow2Corrupt": salvage.ErrQcow2Corrupt, "ErrEmptyVolumeMeta": salvage.ErrEmptyVolumeMeta,
	},
	"tokenring": {
		"ErrCleanupNotProven": tokenring.ErrCleanupNotProven, "ErrInconsistentRing": tokenring.ErrInconsistentRing,
		"ErrInvalidBaselines": tokenring.ErrInvalidBaselines, "ErrInvalidLimits": tokenring.ErrInvalidLimits,
		"ErrInvalidOptions": tokenring.ErrInvalidOptions, "ErrInvalidReplication": tokenring.ErrInvalidReplication,
		"ErrInvalidRing": tokenring.ErrInvalidRing, "ErrInvalidURL": tokenring.ErrInvalidURL, "ErrKeyspaceNotFound": tokenring.ErrKeyspaceNotFound,
		"ErrMalformedReply": tokenring.ErrMalformedReply, "ErrMissingLocation": tokenring.ErrMissingLocation, "ErrNoBaseline": tokenring.ErrNoBaseline,
		"ErrNotFound": tokenring.ErrNotFound, "ErrNotJoined": tokenring.ErrNotJoined, "ErrNotMurmur3": tokenring.ErrNotMurmur3,
		"ErrRedirect": tokenring.ErrRedirect, "ErrReplicationMismatch": tokenring.ErrReplicationMismatch,
		"ErrTokenWithoutTLS": tokenring.ErrTokenWithoutTLS, "ErrTooLarge": tokenring.ErrTooLarge,
		"ErrUnknownDatacenter": tokenring.ErrUnknownDatacenter, "ErrUnknownEndpoint": tokenring.ErrUnknownEndpoint,
	},
	"tokenring/mgmtapi": {"ErrJobNotFound": mgmtapi.ErrJobNotFound},
	"rebuild": {
		"ErrInvalidOptions": rebuild.ErrInvalidOptions, "ErrInvalidSetting": rebuild.ErrInvalidSetting, "ErrNotFound": rebuild.ErrNotFound,
	},
	"instance": {},
	"backupdelete": {
		"ErrClosed": backupdelete.ErrClosed, "ErrCorrupt": backupdelete.ErrCorrupt, "ErrInProgress": backupdelete.ErrInProgress,
		"ErrInvalidRef": backupdelete.ErrInvalidRef, "ErrInvalidSetting": backupdelete.ErrInvalidSetting,
		"ErrListingInconsistent": backupdelete.ErrListingInconsistent, "ErrLocked": backupdelete.ErrLocked,
		"ErrNotFound": backupdelete.ErrNotFound, "ErrPanic": backupdelete.ErrPanic, "ErrTimeout": backupdelete.ErrTimeout,
	},
}

// shared are the classes several packages export under their own names
// with one value, so that errors.Is matches across packages; their text
// names the class, not a package.
var shared = []error{errclass.ErrNotFound, settings.ErrInvalid, bounded.ErrTooLarge}

// TestSentinelsCarryTheirPackagePrefix: every exported error value of a
// package says which package it comes from ("diskscan: corrupt input"),
// except the shared classes, which are the same value in every package.
func TestSentinelsCarryTheirPackagePrefix(t *testing.T) {
	for dir, byName := range sentinels {
		names := exportedErrorVars(t, filepath.Join(repoRoot, dir))
		if len(names) != len(byName) {
			t.Errorf("%s exports %d error values %v; the test lists %d: add the new ones to sentinels", dir, len(names), names, len(byName))
		}
		prefix := filepath.Base(dir) + ": "
		for _, name := range names {
			err, ok := byName[name]
			if !ok {
				t.Errorf("%s.%s is not listed in sentinels", dir, name)
				continue
			}
			if err == nil {
				t.Errorf("%s.%s is nil", dir, name)
				continue
			}
			if isShared(err) {
				continue
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("%s.%s = %q; want it to start with %q", dir, name, err, prefix)
			}
		}
	}
}

// TestMalformedAndRedirectAreOneClass: each package's malformed-input and
// redirect sentinels are its own (their texts differ) and match one
// another and the class under errors.Is, so a host catches "any malformed
// input" with one test.
func TestMalformedAndRedirectAreOneClass(t *testing.T) {
	for class, errs := range map[error][]error{
		errclass.ErrMalformed: {diskscan.ErrCorrupt, salvage.ErrCorrupt, tokenring.ErrMalformedReply},
		errclass.ErrRedirect:  {tokenring.ErrRedirect},
	} {
		for _, a := range errs {
			if !errors.Is(a, class) {
				t.Errorf("%q is not of class %q", a, class)
			}
			for _, b := range errs {
				if !errors.Is(a, b) {
					t.Errorf("errors.Is(%q, %q) is false; both are of class %q", a, b, class)
				}
			}
		}
	}
	if errors.Is(diskscan.ErrCorrupt, tokenring.ErrRedirect) || errors.Is(tokenring.ErrRedirect, tokenring.ErrMalformedReply) {
		t.Error("a malformed-input sentinel matches a redirect")
	}
	if errors.Is(diskscan.ErrNotRegular, diskscan.ErrCorrupt) || errors.Is(salvage.ErrQcow2Corrupt, salvage.ErrCorrupt) {
		t.Error("a sentinel outside the malformed class matches one in it")
	}
}

func isShared(err error) bool {
	for _, s := range shared {
		if err == s {
			return true
		}
	}
	return false
}

// exportedErrorVars returns the exported package-level variables named
// Err... in the non-test files of dir.
func exportedErrorVars(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, id := range s.(*ast.ValueSpec).Names {
					if id.IsExported() && strings.HasPrefix(id.Name, "Err") {
						names = append(names, id.Name)
					}
				}
			}
		}
	}
	sort.Strings(names)
	return names
}
