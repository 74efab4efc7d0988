package rebuildtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/caretaker-storage/caretaker/rebuild"
)

// testTicketStore checks the contract of rebuild.TicketStore: tickets
// round-trip with every field, a put replaces the ticket with the same ID
// and loses no other, puts on missing volumes are NotFound, deleting what
// is gone is success, returned slices are copies, concurrent use is safe,
// and a cancelled context never passes for NotFound.
func testTicketStore(t *testing.T, newHarness func(t *testing.T) TicketStoreHarness) {
	ctx := context.Background()

	t.Run("NewVolumeHasNoTickets", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		if ts, err := h.Store().Tickets(ctx, "vol-a"); err != nil || len(ts) != 0 {
			t.Fatalf("Tickets of a new volume = %v, %v; want none and no error", ts, err)
		}
	})

	t.Run("MissingVolumeHasNoTickets", func(t *testing.T) {
		h := newHarness(t)
		if ts, err := h.Store().Tickets(ctx, "vol-missing"); err != nil || len(ts) != 0 {
			t.Fatalf("Tickets of a missing volume = %v, %v; want none and no error", ts, err)
		}
	})

	t.Run("PutTicketRoundTrip", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		mustCreate(t, h, sampleSpec("vol-b"))
		want := []rebuild.Ticket{RebuildingTicket("vol-a", "node-1"), WorkloadTicket("csi-pod", "node-2"), UserTicket("ui", "node-3")}
		for _, tk := range want {
			if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
				t.Fatalf("PutTicket(%s): %v", tk.ID, err)
			}
		}
		checkTickets(t, "vol-a", mustTickets(t, h, "vol-a"), want)
		checkTickets(t, "vol-b (untouched)", mustTickets(t, h, "vol-b"), nil)
	})

	t.Run("PutTicketReplacesSameID", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		workload := WorkloadTicket("csi-pod", "node-2")
		first := RebuildingTicket("vol-a", "node-1")
		moved := first
		moved.NodeID, moved.DisableFrontend = "node-9", false
		for _, tk := range []rebuild.Ticket{workload, first, moved} {
			if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
				t.Fatalf("PutTicket(%s): %v", tk.ID, err)
			}
		}
		checkTickets(t, "after replacing the rebuilding ticket", mustTickets(t, h, "vol-a"), []rebuild.Ticket{workload, moved})
	})

	t.Run("PutTicketOnMissingVolumeIsNotFound", func(t *testing.T) {
		h := newHarness(t)
		tk := RebuildingTicket("vol-missing", "node-1")
		if err := h.Store().PutTicket(ctx, "vol-missing", tk); !errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("PutTicket on a volume that never existed: got %v, want an error wrapping ErrNotFound", err)
		}
		checkTickets(t, "vol-missing after a refused put", mustTickets(t, h, "vol-missing"), nil)

		mustCreate(t, h, sampleSpec("vol-gone"))
		if err := h.DeleteVolume(ctx, "vol-gone"); err != nil {
			t.Fatalf("DeleteVolume: %v", err)
		}
		if err := h.Store().PutTicket(ctx, "vol-gone", RebuildingTicket("vol-gone", "node-1")); !errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("PutTicket on a deleted volume: got %v, want an error wrapping ErrNotFound", err)
		}
	})

	t.Run("DeleteTicketRemovesOnlyThatTicket", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		ours, pod := RebuildingTicket("vol-a", "node-1"), WorkloadTicket("csi-pod", "node-2")
		for _, tk := range []rebuild.Ticket{ours, pod} {
			if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
				t.Fatalf("PutTicket(%s): %v", tk.ID, err)
			}
		}
		if err := h.Store().DeleteTicket(ctx, "vol-a", ours.ID); err != nil {
			t.Fatalf("DeleteTicket: %v", err)
		}
		checkTickets(t, "after deleting the rebuilding ticket", mustTickets(t, h, "vol-a"), []rebuild.Ticket{pod})
	})

	t.Run("DeletingWhatIsGoneIsSuccess", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		pod := WorkloadTicket("csi-pod", "node-2")
		if err := h.Store().PutTicket(ctx, "vol-a", pod); err != nil {
			t.Fatalf("PutTicket: %v", err)
		}
		id := rebuild.TicketID("vol-a")
		for i := range 2 {
			if err := h.Store().DeleteTicket(ctx, "vol-a", id); err != nil && !errors.Is(err, rebuild.ErrNotFound) {
				t.Errorf("DeleteTicket #%d of a missing ticket: %v; want nil or an error wrapping ErrNotFound", i+1, err)
			}
		}
		checkTickets(t, "after deleting a missing ticket", mustTickets(t, h, "vol-a"), []rebuild.Ticket{pod})
		if err := h.Store().DeleteTicket(ctx, "vol-missing", rebuild.TicketID("vol-missing")); err != nil && !errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("DeleteTicket on a missing volume: %v; want nil or an error wrapping ErrNotFound", err)
		}
	})

	t.Run("ReturnedTicketsAreCopies", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		tk := RebuildingTicket("vol-a", "node-1")
		if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
			t.Fatalf("PutTicket: %v", err)
		}
		got := mustTickets(t, h, "vol-a")
		for i := range got {
			got[i].Priority, got[i].NodeID, got[i].DisableFrontend = 1, "scribbled", false
		}
		checkTickets(t, "after a caller wrote to a returned slice", mustTickets(t, h, "vol-a"), []rebuild.Ticket{tk})
	})

	t.Run("ConcurrentVolumes", func(t *testing.T) {
		h := newHarness(t)
		const n = 8
		for i := range n {
			mustCreate(t, h, sampleSpec(fmt.Sprintf("vol-%d", i)))
		}
		concurrently(t, n, func(i int, fail func(error)) {
			name := fmt.Sprintf("vol-%d", i)
			ours, pod := RebuildingTicket(name, "node-1"), WorkloadTicket("csi-"+name, "node-2")
			for _, tk := range []rebuild.Ticket{ours, pod} {
				if err := h.Store().PutTicket(ctx, name, tk); err != nil {
					fail(fmt.Errorf("PutTicket(%s, %s): %w", name, tk.ID, err))
				}
			}
			if _, err := h.Store().Tickets(ctx, name); err != nil {
				fail(fmt.Errorf("Tickets(%s): %w", name, err))
			}
			if i%2 == 0 {
				if err := h.Store().DeleteTicket(ctx, name, ours.ID); err != nil {
					fail(fmt.Errorf("DeleteTicket(%s): %w", name, err))
				}
			}
		})
		for i := range n {
			name := fmt.Sprintf("vol-%d", i)
			want := []rebuild.Ticket{WorkloadTicket("csi-"+name, "node-2")}
			if i%2 != 0 {
				want = append(want, RebuildingTicket(name, "node-1"))
			}
			checkTickets(t, name+" after concurrent use", mustTickets(t, h, name), want)
		}
	})

	t.Run("ConcurrentPutsLoseNoTicket", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		const n = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		var stored []rebuild.Ticket
		for i := range n {
			tk := WorkloadTicket(fmt.Sprintf("csi-pod-%d", i), "node-2")
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := h.Store().PutTicket(ctx, "vol-a", tk)
				if errors.Is(err, rebuild.ErrNotFound) {
					t.Errorf("concurrent PutTicket on an existing volume reported NotFound: %v", err)
				}
				if err == nil {
					mu.Lock()
					stored = append(stored, tk)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(stored) == 0 {
			t.Fatalf("none of %d concurrent PutTickets on one volume succeeded", n)
		}
		got := mustTickets(t, h, "vol-a")
		byID := ticketsByID(t, got)
		for _, tk := range stored {
			if g, ok := byID[tk.ID]; !ok || g != tk {
				t.Errorf("ticket %s was put successfully but is lost or changed (%+v): a put must not overwrite concurrent puts", tk.ID, g)
			}
		}
	})

	t.Run("CancelledContextIsNeverNotFound", func(t *testing.T) {
		h := newHarness(t)
		mustCreate(t, h, sampleSpec("vol-a"))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		tk := RebuildingTicket("vol-a", "node-1")
		err := h.Store().PutTicket(cctx, "vol-a", tk)
		switch {
		case errors.Is(err, rebuild.ErrNotFound):
			t.Errorf("PutTicket with a cancelled context reported NotFound: %v", err)
		case err == nil:
			checkTickets(t, "after a successful put with a cancelled context", mustTickets(t, h, "vol-a"), []rebuild.Ticket{tk})
		}
		if ts, err := h.Store().Tickets(cctx, "vol-a"); errors.Is(err, rebuild.ErrNotFound) {
			t.Errorf("Tickets with a cancelled context reported NotFound: %v", err)
		} else if err == nil && len(ts) > 1 {
			t.Errorf("Tickets with a cancelled context = %v", ts)
		}

		if err := h.Store().PutTicket(ctx, "vol-a", tk); err != nil {
			t.Fatalf("PutTicket: %v", err)
		}
		err = h.Store().DeleteTicket(cctx, "vol-a", tk.ID)
		if err == nil || errors.Is(err, rebuild.ErrNotFound) {
			// Success as the driver reads it: the ticket must be gone.
			checkTickets(t, fmt.Sprintf("after DeleteTicket with a cancelled context returned %v", err), mustTickets(t, h, "vol-a"), nil)
		}
	})
}
