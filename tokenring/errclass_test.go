package tokenring

import (
	"errors"
	"net/http"
	"testing"

	"github.com/caretaker-storage/caretaker/internal/errclass"
)

// TestAPIErrorRedirectMatchesTheClass: an HTTP 3xx reply matches
// ErrRedirect, the redirect class, and another package's redirect
// sentinel, so a host that refuses "any redirect" needs one errors.Is; a
// 2xx/4xx reply matches none of them, and a 3xx is not malformed input.
func TestAPIErrorRedirectMatchesTheClass(t *testing.T) {
	other := errclass.New("elsewhere", "redirect refused", errclass.ErrRedirect)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		e := &APIError{Method: "GET", Path: "/storage_service/hostid/local", StatusCode: code}
		for _, target := range []error{ErrRedirect, errclass.ErrRedirect, other} {
			if !errors.Is(e, target) {
				t.Errorf("HTTP %d does not match %q", code, target)
			}
		}
		if errors.Is(e, ErrMalformedReply) || errors.Is(e, ErrNotFound) {
			t.Errorf("HTTP %d matches malformed input or not found", code)
		}
	}
	for _, code := range []int{http.StatusOK, http.StatusNotFound, http.StatusInternalServerError} {
		if e := (&APIError{StatusCode: code}); errors.Is(e, ErrRedirect) || errors.Is(e, other) {
			t.Errorf("HTTP %d matches the redirect class", code)
		}
	}
	if ErrRedirect.Error() != "tokenring: redirect refused" || ErrMalformedReply.Error() != "tokenring: malformed reply" {
		t.Errorf("texts %q, %q; want the package prefix", ErrRedirect, ErrMalformedReply)
	}
}
