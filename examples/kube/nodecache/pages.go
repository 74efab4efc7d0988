package nodecache

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// PageSize is how many objects one page of ListPages carries: the most a
// caller decodes at once.
const PageSize = 500

// PageResult says how a paged list went.
type PageResult struct {
	// ResourceVersion is the first page's: every page of a list that
	// was not resumed is read at it.
	ResourceVersion string
	// Pages is the number of pages read, Resumed the number of times an
	// expired continue token was replaced by the API server's
	// inconsistent one (see ListPages).
	Pages, Resumed int
}

// Consistent reports whether the whole list was read at ResourceVersion:
// no expired continue token was replaced on the way.
func (r PageResult) Consistent() bool { return r.Resumed == 0 }

// ListPages lists ri's objects that opts selects, PageSize at a time, and
// hands each page to each as it comes (each may keep what it wants of the
// page; the page is not read again). It returns when the last page is
// read, each fails, or a request fails.
//
// A page asked with a continue token whose resource version etcd has
// compacted since the first page is refused with 410 Gone. The API server
// then returns, in the error's Status (metadata.continue), a token that
// goes on from the same key at the latest resource version
// (handleCompactedErrorForPaging in k8s.io/apiserver's etcd3 store).
// ListPages resumes with that token instead of starting over from the
// first page, and counts it in PageResult.Resumed: the pages after it are
// read at a later version, so an object created, changed or deleted
// meanwhile among the keys already read is not seen. A caller that needs
// one consistent view checks PageResult.Consistent. A 410 without such a
// token (the first page's, or a server that offers none) is returned.
func ListPages(ctx context.Context, ri dynamic.ResourceInterface, opts metav1.ListOptions,
	each func(*unstructured.UnstructuredList) error) (PageResult, error) {
	var res PageResult
	if opts.ResourceVersion == "0" {
		// "Any version" is served from the API server's cache whole, with
		// no pages: ask for the latest, which pages.
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
	opts.Limit = PageSize
	for {
		list, err := ri.List(ctx, opts)
		if err != nil {
			if next, ok := inconsistentContinue(err); ok && opts.Continue != "" {
				res.Resumed++
				opts.Continue = next
				continue
			}
			return res, err
		}
		if res.Pages == 0 {
			res.ResourceVersion = list.GetResourceVersion()
		}
		res.Pages++
		if err := each(list); err != nil {
			return res, err
		}
		if list.GetContinue() == "" {
			return res, nil
		}
		opts.Continue = list.GetContinue()
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
}

// inconsistentContinue returns the continue token the API server offers
// in a 410 Gone (Expired) answer to a page whose token is too old.
func inconsistentContinue(err error) (string, bool) {
	var se *apierrors.StatusError
	if !errors.As(err, &se) || !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		return "", false
	}
	c := se.ErrStatus.Continue
	return c, c != ""
}
