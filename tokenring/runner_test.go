package tokenring_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"go.uber.org/mock/gomock"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/mocks"
)

func TestRunCleanupStopsWhenItCannotStart(t *testing.T) {
	boom := errors.New("boom")
	ctrl := gomock.NewController(t)

	c := mocks.NewMockCleaner(ctrl)
	c.EXPECT().StopCleanups(gomock.Any()).Return(boom)
	if _, err := tokenring.RunCleanup(context.Background(), c); !errors.Is(err, boom) {
		t.Fatalf("stop failure: %v", err)
	}

	c = mocks.NewMockCleaner(ctrl)
	c.EXPECT().StopCleanups(gomock.Any()).Return(nil)
	c.EXPECT().CleanupKeyspaces(gomock.Any()).Return(nil, boom)
	if _, err := tokenring.RunCleanup(context.Background(), c); !errors.Is(err, boom) {
		t.Fatalf("list failure: %v", err)
	}
}

func TestRunCleanupStopsAtCancellation(t *testing.T) {
	ctrl := gomock.NewController(t)
	ctx, cancel := context.WithCancel(context.Background())
	c := mocks.NewMockCleaner(ctrl)
	c.EXPECT().StopCleanups(gomock.Any()).Return(nil)
	c.EXPECT().CleanupKeyspaces(gomock.Any()).Return([]string{"a", "b"}, nil)
	c.EXPECT().CleanupKeyspace(gomock.Any(), "a").DoAndReturn(func(context.Context, string) error {
		cancel() // the operator's Job got SIGTERM while cleaning a
		return nil
	})
	report, err := tokenring.RunCleanup(ctx, c)
	if !errors.Is(err, context.Canceled) || !reflect.DeepEqual(report.Cleaned, []string{"a"}) || len(report.Failed) != 0 {
		t.Fatalf("report %+v, error %v", report, err)
	}
}

func TestReadMembershipRejectsAnAmbiguousHostID(t *testing.T) {
	ctrl := gomock.NewController(t)
	src := mocks.NewMockRingSource(ctrl)
	src.EXPECT().LocalHostID(gomock.Any()).Return("h1", nil)
	src.EXPECT().HostIDs(gomock.Any()).Return(map[string]string{"10.0.0.1": "h1", "10.0.0.9": "h1"}, nil)
	if _, err := tokenring.ReadMembership(context.Background(), src); !errors.Is(err, tokenring.ErrMalformedReply) {
		t.Fatalf("error = %v", err)
	}
}
