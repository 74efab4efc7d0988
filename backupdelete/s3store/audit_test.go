package s3store

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/internal/s3test"
)

var (
	auditContents  = regexp.MustCompile(`(?s)<Contents>.*?</Contents>`)
	auditTruncated = regexp.MustCompile(`<IsTruncated>true</IsTruncated>`)
	auditToken     = regexp.MustCompile(`(?s)<NextContinuationToken>.*?</NextContinuationToken>`)
	auditKeyCount  = regexp.MustCompile(`<KeyCount>\d+</KeyCount>`)
)

// capListing is a gateway that answers at most n keys per listing, whatever
// MaxKeys asked, and marks the answer complete: a cut at its own limit, not
// at the client's page size.
func capListing(n int) *s3test.Fault {
	return &s3test.Fault{Rewrite: func(body []byte) []byte {
		kept := 0
		body = auditContents.ReplaceAllFunc(body, func(entry []byte) []byte {
			if kept == n {
				return nil
			}
			kept++
			return entry
		})
		body = auditTruncated.ReplaceAll(body, []byte("<IsTruncated>false</IsTruncated>"))
		body = auditToken.ReplaceAll(body, nil)
		return auditKeyCount.ReplaceAll(body, []byte(fmt.Sprintf("<KeyCount>%d</KeyCount>", kept)))
	}}
}

// TestListingCutBelowPageSize: a gateway cuts every listing of backups/ at
// 2 keys (less than the 1000 asked) and marks it complete. backup-a,
// volume.cfg's last, is on the cut listing, so the last-backup check
// passes, and the last page is not full, so the page check does not run;
// backup-d, past the cut, shares ckS with the deleted backup-b. Longhorn's
// deletion, and ours at BASE, deletes ckS. The listing must be proven to
// end where it says (nothing listed past its last key) before anything is
// deleted; once the gateway is honest the same deletion goes through.
func TestListingCutBelowPageSize(t *testing.T) {
	e := newEnv(t, true, Options{})
	ckD := checksum("d")
	backups := []listingBackup{
		{"backup-a", "2026-11-04T00:00:00Z", []string{ckA}},
		{"backup-b", "2026-11-01T00:00:00Z", []string{ckS, ckB}},
		{"backup-c", "2026-11-02T00:00:00Z", []string{ckC}},
		{"backup-d", "2026-11-03T00:00:00Z", []string{ckS, ckD}},
	}
	writeListingFixture(t, e, "backup-a", backups)
	var mu sync.Mutex
	lie := true
	cut := capListing(2)
	var rec deleteRecorder
	e.proxy.SetHook(rec.hook(func(op string, r *http.Request) *s3test.Fault {
		mu.Lock()
		defer mu.Unlock()
		if lie && backupsListing(op, r) {
			return cut
		}
		return nil
	}))
	victim := backupdelete.BackupRef{Volume: "vol-a", Name: "backup-b"}
	c, err := e.store.DeleteBackupReport(ctxT(t), victim)
	if !errors.Is(err, backupdelete.ErrListingInconsistent) {
		t.Errorf("DeleteBackupReport: %+v, %v; want ErrListingInconsistent", c, err)
	}
	rec.none(t)
	refusedIntact(t, e, "backup-b", ckA, ckS, ckB, ckC, ckD)

	// A sweep lists the backups the same way.
	if _, err := e.store.CollectBlocks(ctxT(t), "vol-a"); !errors.Is(err, backupdelete.ErrListingInconsistent) {
		t.Errorf("CollectBlocks: %v; want ErrListingInconsistent", err)
	}
	rec.none(t)
	refusedIntact(t, e, "backup-b", ckA, ckS, ckB, ckC, ckD)

	mu.Lock()
	lie = false
	mu.Unlock()
	if _, err := e.store.DeleteBackupReport(ctxT(t), victim); err != nil {
		t.Fatalf("honest retry: %v", err)
	}
	if have := e.blocks(t, "vol-a"); have[ckB] || !have[ckS] || !have[ckC] || !have[ckA] || !have[ckD] {
		t.Fatalf("honest retry: blocks %v; want only ckB gone", have)
	}
}

// TestListingProbeIgnoringStartAfter: a gateway that ignores StartAfter
// answers the probe past the listing's end with the listing's own first
// key: that is no proof the listing ended, and nothing is deleted.
func TestListingProbeIgnoringStartAfter(t *testing.T) {
	e := newEnv(t, true, Options{})
	writeListingFixture(t, e, "backup-3", lieFixture)
	var rec deleteRecorder
	e.proxy.SetHook(rec.hook(func(op string, r *http.Request) *s3test.Fault {
		if !backupsListing(op, r) || r.URL.Query().Get("start-after") == "" {
			return nil
		}
		prefix := r.URL.Query().Get("prefix")
		return &s3test.Fault{Body: []byte(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+
			`<ListBucketResult><Name>%s</Name><Prefix>%s</Prefix><KeyCount>1</KeyCount><MaxKeys>1</MaxKeys>`+
			`<Contents><Key>%s</Key><Size>1</Size></Contents><IsTruncated>true</IsTruncated>`+
			`<NextContinuationToken>t</NextContinuationToken></ListBucketResult>`, e.bucket, prefix, cfgKey("backup-1")))}
	}))
	_, err := e.store.DeleteBackupReport(ctxT(t), backupdelete.BackupRef{Volume: "vol-a", Name: "backup-2"})
	if !errors.Is(err, backupdelete.ErrCorrupt) && !errors.Is(err, backupdelete.ErrListingInconsistent) {
		t.Fatalf("DeleteBackupReport: %v; want a refusal (the probe's answer is not past the listing)", err)
	}
	rec.none(t)
	refusedIntact(t, e, "backup-2", ckA, ckS, ckB, ckC)
}
