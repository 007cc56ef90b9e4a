package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/agenticd/agenticd/internal/pgtest"
	"github.com/agenticd/agenticd/presenters"
)

// A writer queued for the write lock leaves when its own context ends, having written
// nothing, and writes once the lock is free.
func TestWaitForTheWriteLockEndsWithTheContext(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		mustCreate(t, s, "s1", "a")
		if err := s.writeMu.Lock(context.Background()); err != nil {
			t.Fatal(err)
		}
		m := presenters.Message{ID: "m1", SessionID: "s1", Role: presenters.RoleUser, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "hi"}}}
		// A deadline, not a cancel before the call: the writer must be queued when it ends.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := s.SaveMessage(ctx, m); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("SaveMessage queued for the write lock until its deadline: %v, want context.DeadlineExceeded", err)
		}
		if n, err := s.CountMessages(context.Background(), "s1"); err != nil || n != 0 {
			t.Errorf("after the write that gave up: %d messages (%v), want none", n, err)
		}
		s.writeMu.Unlock()
		if err := s.SaveMessage(context.Background(), m); err != nil {
			t.Fatalf("SaveMessage with the lock free: %v", err)
		}
	})
}

// openThroughProxy opens a store on a new schema of the package's cluster, reached
// through a proxy that can cut it off.
func openThroughProxy(t *testing.T, limits PostgresLimits) (*Store, *pgtest.Proxy) {
	t.Helper()
	c := pgtest.Shared(t)
	u, err := url.Parse(c.NewSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", c.Port()))
	u.Host = proxy.Addr()
	s, err := OpenOnPostgresWith(context.Background(), u.String(), limits)
	if err != nil {
		t.Fatal(err)
	}
	// Closed before the proxy (cleanups run last first), and healed first: a connection
	// held mid-query would keep Close waiting.
	t.Cleanup(func() {
		proxy.Heal()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, proxy
}

// Behind a partition the database neither answers nor fails. A call without a deadline
// of its own, or with a later one, fails within the store's bound as unavailable (to be
// tried again), reads and writes alike; once the partition heals the store works again.
func TestCallsGiveUpOnAPartitionedDatabase(t *testing.T) {
	s, proxy := openThroughProxy(t, PostgresLimits{Stall: time.Second, Statement: 30 * time.Second, Call: 500 * time.Millisecond})
	mustCreate(t, s, "s1", "a")
	proxy.Partition()
	later, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	m := presenters.Message{ID: "m1", SessionID: "s1", Role: presenters.RoleUser, Status: presenters.MessageComplete,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "hi"}}}
	for _, c := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"GetConversation", func(ctx context.Context) error { _, err := s.GetConversation(ctx, "s1"); return err }},
		{"Messages", func(ctx context.Context) error {
			_, err := s.Messages(ctx, "s1", presenters.MessageQuery{})
			return err
		}},
		{"SaveMessage", func(ctx context.Context) error { return s.SaveMessage(ctx, m) }},
		{"AcquireLease", func(ctx context.Context) error {
			_, err := s.AcquireLease(ctx, "s1", "r1", "h:1", time.Minute)
			return err
		}},
	} {
		if err := c.call(context.Background()); !errors.Is(err, ErrUnavailable) || !IsUnavailable(err) {
			t.Errorf("%s on a partitioned database: %v, want ErrUnavailable", c.name, err)
		}
	}
	if _, err := s.GetConversation(later, "s1"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("GetConversation with an hour to go, on a partitioned database: %v, want ErrUnavailable", err)
	}
	proxy.Heal()
	// The connections the partition held were closed; new ones serve the calls.
	for tries := 0; ; tries++ {
		err := s.SaveMessage(context.Background(), m)
		if err == nil {
			break
		}
		if !IsUnavailable(err) || tries == 10 {
			t.Fatalf("SaveMessage after the partition healed: %v", err)
		}
	}
	if got, err := s.Messages(context.Background(), "s1", presenters.MessageQuery{}); err != nil || len(got) != 1 {
		t.Fatalf("after the partition: %d messages (%v), want the one saved", len(got), err)
	}
}

// A writer that stalled on a partitioned database holds the write lock; the writers
// behind it leave when their own contexts end, even with no bound of the store's.
func TestWritersBehindAStalledWriteLeave(t *testing.T) {
	s, proxy := openThroughProxy(t, PostgresLimits{Stall: time.Second, Statement: 30 * time.Second})
	mustCreate(t, s, "s1", "a")
	proxy.Partition()
	m := presenters.Message{ID: "m1", SessionID: "s1", Role: presenters.RoleUser, Status: presenters.MessageComplete,
		Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "hi"}}}
	stalled := make(chan error, 1)
	go func() { stalled <- s.SaveMessage(context.Background(), m) }()
	for limit := time.Now().Add(30 * time.Second); s.writeMu.sem.TryAcquire(1); { // until the stalled write holds the lock
		s.writeMu.sem.Release(1)
		select {
		case err := <-stalled:
			t.Fatalf("the write meant to stall returned first: %v", err)
		default:
		}
		if time.Now().After(limit) {
			t.Fatal("the write meant to stall never took the write lock")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.SaveMessage(ctx, m); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("SaveMessage behind the stalled one: %v, want its own deadline's error", err)
	}
	proxy.Heal()
	if err := <-stalled; err != nil {
		t.Errorf("the stalled SaveMessage once the partition healed: %v", err)
	}
}
