package service

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// lookedAtQueue is the real store, telling when a session's queue was read, and holding
// one queued message of its own for the session busy.
type lookedAtQueue struct {
	*store.Store
	idleRead chan struct{}
}

func (l lookedAtQueue) QueuedMessages(ctx context.Context, sessionID string) ([]presenters.QueuedMessage, error) {
	switch sessionID {
	case "busy":
		return []presenters.QueuedMessage{{SessionID: "busy", MessageID: "m1"}}, nil
	case "idle":
		defer func() {
			select {
			case l.idleRead <- struct{}{}:
			default:
			}
		}()
	}
	return l.Store.QueuedMessages(ctx, sessionID)
}

// With several replicas a session is due after every take-over, reads' included; one
// with nothing queued is not made live here (which would load it and start its agent),
// while one with a message waiting is.
func TestQueueMakesLiveOnlyASessionWithMessagesWaiting(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	looked := lookedAtQueue{Store: st, idleRead: make(chan struct{}, 1)}
	q := newQueue(looked, nil, discard)
	var (
		mu   sync.Mutex
		live []string
		busy = make(chan struct{})
	)
	q.RunOnOwner(func(_ context.Context, sessionID string) (bool, error) {
		mu.Lock()
		live = append(live, sessionID)
		mu.Unlock()
		if sessionID == "busy" {
			close(busy)
		}
		return false, nil // another replica runs it: the queue leaves it there
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); q.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })

	q.Due("idle")
	select {
	case <-looked.idleRead:
	case <-time.After(30 * time.Second):
		t.Fatal("the queue never read the idle session's queue")
	}
	// Run looks at one session at a time: idle's look is over before busy's begins.
	q.Due("busy")
	select {
	case <-busy:
	case <-time.After(30 * time.Second):
		t.Fatal("the queue never made the session with a message waiting live")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(live, []string{"busy"}) {
		t.Fatalf("sessions made live: %q, want only busy", live)
	}
}
