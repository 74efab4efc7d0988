package spdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/caretaker-storage/caretaker/instance"
	"github.com/caretaker-storage/caretaker/internal/errclass"
	"github.com/caretaker-storage/caretaker/orphan"
	"github.com/caretaker-storage/caretaker/spdk"
	"github.com/caretaker-storage/caretaker/spdk/internal/fixture"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// TestUnexpectedResultIsOfTheMalformedClass: an SPDK result of the wrong
// shape, read by the adapter, matches spdk.ErrUnexpectedResult,
// spdkrpc.ErrUnexpectedResult, the shared malformed-input class and
// another package's sentinel of that class; a connection error does not.
func TestUnexpectedResultIsOfTheMalformedClass(t *testing.T) {
	other := errclass.New("elsewhere", "corrupt input", errclass.ErrMalformed)
	if got := spdk.ErrUnexpectedResult.Error(); got != "spdk: unexpected result" {
		t.Errorf("ErrUnexpectedResult = %q", got)
	}
	s := newScene(t)
	inv := newOrphans(t, s.client(t), noRecords)
	s.srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvols", Action: spdktest.Replace, Result: json.RawMessage(`[null]`)})
	_, scanErr := inv.Scan(context.Background())
	// PurgeOrder's own finding (an lvol without a UUID) is the adapter's.
	_, orderErr := spdk.PurgeOrder([]spdkrpc.Bdev{{Name: "x", Aliases: []string{"disk-1/r"}, ProductName: spdkrpc.ProductLogicalVolume,
		DriverSpecific: spdkrpc.BdevDriverSpecific{Lvol: &spdkrpc.BdevLvolInfo{LvolStoreUUID: "L"}}}}, "r", "u1")
	for name, err := range map[string]error{"scan": scanErr, "purge order": orderErr} {
		for _, target := range []error{spdk.ErrUnexpectedResult, spdkrpc.ErrUnexpectedResult, errclass.ErrMalformed, other} {
			if !errors.Is(err, target) {
				t.Errorf("%s: %v does not match %v", name, err, target)
			}
		}
		if errors.Is(err, spdkrpc.ErrConnection) || errors.Is(err, orphan.ErrPreconditionFailed) {
			t.Errorf("%s: %v matches a connection failure or a refusal", name, err)
		}
	}
	s.srv.Inject(spdktest.Fault{Method: "bdev_lvol_get_lvols", Action: spdktest.Garbage})
	if _, err := inv.Scan(context.Background()); !errors.Is(err, spdkrpc.ErrConnection) || errors.Is(err, spdk.ErrUnexpectedResult) {
		t.Errorf("garbage: %v, want a connection error only", err)
	}
}

// TestErrorTextsStartWithSpdk: the sentinels and the errors the adapter's
// exported functions return start with "spdk: ", while the refusals still
// match orphan.ErrPreconditionFailed and an ended context still matches
// its error.
func TestErrorTextsStartWithSpdk(t *testing.T) {
	refusals := []error{spdk.ErrUUIDMismatch, spdk.ErrReplicaRecordExists, spdk.ErrNoLongerEmpty, spdk.ErrExposureChanged, spdk.ErrNoRecordCount}
	for _, err := range append(refusals, spdk.ErrUnexpectedResult) {
		if !strings.HasPrefix(err.Error(), "spdk: ") {
			t.Errorf("sentinel %q lacks the prefix", err)
		}
	}
	for _, err := range refusals {
		if !errors.Is(err, orphan.ErrPreconditionFailed) {
			t.Errorf("%q does not wrap orphan.ErrPreconditionFailed", err)
		}
	}

	s := newScene(t)
	c := s.client(t)
	d := s.deleter(t)
	ctx := context.Background()
	got := map[string]error{}
	_, got["NewOrphans"] = spdk.NewOrphans(c, nil, spdk.Options{})
	got["Delete, not v2"] = d.Delete(ctx, func() orphan.Record {
		r := record(t, orphan.KindReplicaInstance, repA, s.uuids["disk-1/"+repA])
		r.DataEngine = orphan.DataEngineV1
		return r
	}())
	fixture.Must(s.srv.RecreateRaid("vol1-e-0"))(t)
	got["Delete, recreated"] = d.Delete(ctx, record(t, orphan.KindEngineInstance, "vol1-e-0", s.uuids["vol1-e-0"]))
	s.srv.Inject(spdktest.Fault{Method: "bdev_raid_get_bdevs", Action: spdktest.Garbage})
	_, got["Scan, garbage"] = newOrphans(t, c, noRecords).Scan(ctx)
	s.srv.Inject(spdktest.Fault{Method: "nvmf_get_subsystems", Action: spdktest.Replace})
	_, _, got["ReadExposures, null"] = spdk.ReadExposures(ctx, s.client(t))
	_, got["PurgeLeftoverExposures, no count"] = d.PurgeLeftoverExposures(ctx)
	failing := instance.LookupFunc(func(context.Context, orphan.Kind, string) (instance.View, error) {
		return instance.View{}, errors.New("cache not synced")
	})
	got["Delete, lookup fails"] = newOrphans(t, s.client(t), failing).Delete(ctx, record(t, orphan.KindReplicaInstance, repB, s.uuids["disk-1/"+repB]))
	for name, err := range got {
		if err == nil || !strings.HasPrefix(err.Error(), "spdk: ") {
			t.Errorf("%s: %v, want an error starting with spdk: ", name, err)
		}
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := newOrphans(t, c, noRecords).Scan(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Scan with an ended context: %v, want context.Canceled", err)
	}
}
