package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// openReplicaStores opens two stores on one new database of the engine, each on
// connections of its own, as two replicas would.
func (e engine) openReplicaStores(t *testing.T) (*Store, *Store) {
	t.Helper()
	first, db := e.openStore(t)
	var other *gorm.DB
	if d, ok := db.Dialector.(*postgres.Dialector); ok {
		other = openPostgresDB(t, d.DSN)
	} else {
		var path string
		if err := db.Raw(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Row().Scan(&path); err != nil {
			t.Fatal(err)
		}
		other = openDB(t, path)
	}
	second, err := New(context.Background(), other)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = second.Close() })
	return first, second
}

func TestAcquireLease(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		if _, err := s.SessionLease(ctx, "s1"); !errors.Is(err, ErrNoLease) {
			t.Fatalf("SessionLease of a session never leased: %v, want ErrNoLease", err)
		}
		before := time.Now()
		l, err := s.AcquireLease(ctx, "s1", "r1", "host1:1", time.Minute)
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if l.SessionID != "s1" || l.Replica != "r1" || l.Address != "host1:1" || l.Previous != "" || l.Expired {
			t.Errorf("a free lease = %+v", l)
		}
		// The database's clock is this machine's; it reads it during the call (to the
		// microsecond on Postgres, the millisecond on SQLite).
		if from, to := before.Add(time.Minute-time.Millisecond), after.Add(time.Minute+time.Millisecond); l.Expires.Before(from) || l.Expires.After(to) {
			t.Errorf("the lease expires at %s, want a minute after the call: between %s and %s", l.Expires, from, to)
		}

		held, err := s.AcquireLease(ctx, "s1", "r2", "host2:2", time.Minute)
		if !errors.Is(err, ErrLeaseHeld) {
			t.Fatalf("another replica's live lease: %v, want ErrLeaseHeld", err)
		}
		if held.Replica != "r1" || held.Address != "host1:1" || !held.Expires.Equal(l.Expires) || held.Expired {
			t.Errorf("the holder's lease = %+v, want %+v", held, l)
		}

		renewed, err := s.AcquireLease(ctx, "s1", "r1", "host1:9", 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if renewed.Previous != "" || renewed.Address != "host1:9" || !renewed.Expires.After(l.Expires) {
			t.Errorf("a renewal = %+v, after %+v", renewed, l)
		}
		got, err := s.SessionLease(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Replica != "r1" || got.Address != "host1:9" || !got.Expires.Equal(renewed.Expires) || got.Expired {
			t.Errorf("SessionLease = %+v, want %+v", got, renewed)
		}
		if _, err := s.AcquireLease(ctx, "s1", "r1", "host1:1", 0); err == nil {
			t.Error("a zero ttl was accepted")
		}
	})
}

// A lapsed lease is its holder's to renew (the database may have been away) until
// another replica asks: that one takes it over, and learns from whom. A released lease is
// renewed by no one.
func TestLeaseExpiresAndIsTakenOver(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		if _, err := s.AcquireLease(ctx, "s1", "r1", "host1:1", 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		waitExpired(t, s, "s1")
		if renewed, err := s.RenewLeases(ctx, "r1", 50*time.Millisecond); err != nil || !slices.Equal(renewed, []string{"s1"}) {
			t.Fatalf("RenewLeases of a lapsed lease = %v, %v; want s1 renewed", renewed, err)
		}
		waitExpired(t, s, "s1")
		if _, err := s.AcquireLease(ctx, "s3", "r1", "host1:1", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseLeases(ctx, "r1", "s3"); err != nil {
			t.Fatal(err)
		}
		if renewed, err := s.RenewLeases(ctx, "r1", 50*time.Millisecond); err != nil || !slices.Equal(renewed, []string{"s1"}) {
			t.Fatalf("RenewLeases after s3 was released = %v, %v; want s1 alone renewed", renewed, err)
		}
		waitExpired(t, s, "s1")
		l, err := s.AcquireLease(ctx, "s1", "r2", "host2:2", time.Minute)
		if err != nil {
			t.Fatalf("taking over an expired lease: %v", err)
		}
		if l.Replica != "r2" || l.Previous != "r1" {
			t.Errorf("a takeover = %+v, want r2 taking over from r1", l)
		}
		if renewed, err := s.RenewLeases(ctx, "r1", time.Minute); err != nil || len(renewed) != 0 {
			t.Errorf("RenewLeases of a lease taken over = %v, %v; want none renewed", renewed, err)
		}
		if held, err := s.AcquireLease(ctx, "s1", "r1", "host1:1", time.Minute); !errors.Is(err, ErrLeaseHeld) || held.Replica != "r2" {
			t.Errorf("the old holder asking again = %+v, %v; want r2's lease and ErrLeaseHeld", held, err)
		}
		if again, err := s.AcquireLease(ctx, "s1", "r2", "host2:2", time.Minute); err != nil || again.Previous != "" {
			t.Errorf("the new holder renewing = %+v, %v; want no takeover", again, err)
		}

		// A replica that finds its own lease lapsed (after a restart) takes it over too.
		if _, err := s.AcquireLease(ctx, "s2", "r1", "host1:1", 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		waitExpired(t, s, "s2")
		if l, err := s.AcquireLease(ctx, "s2", "r1", "host1:1", time.Minute); err != nil || l.Previous != "r1" {
			t.Errorf("taking back a lapsed lease of one's own = %+v, %v; want Previous r1", l, err)
		}
	})
}

// waitExpired waits until the session's lease has expired by the database's clock.
func waitExpired(t *testing.T, s *Store, sessionID string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l, err := s.SessionLease(context.Background(), sessionID)
		if err != nil {
			t.Fatal(err)
		}
		if l.Expired {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease %+v has not expired", l)
		}
	}
}

func TestRenewLeases(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		before := map[string]Lease{}
		for _, l := range []struct{ session, replica string }{{"s1", "r1"}, {"s2", "r1"}, {"s3", "r2"}} {
			got, err := s.AcquireLease(ctx, l.session, l.replica, "host", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			before[l.session] = got
		}
		renewed, err := s.RenewLeases(ctx, "r1", time.Hour)
		slices.Sort(renewed)
		if err != nil || !slices.Equal(renewed, []string{"s1", "s2"}) {
			t.Fatalf("RenewLeases(r1) = %v, %v; want s1 and s2", renewed, err)
		}
		for id, want := range map[string]bool{"s1": true, "s2": true, "s3": false} {
			l, err := s.SessionLease(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if later := l.Expires.Sub(before[id].Expires) > 30*time.Minute; later != want {
				t.Errorf("%s expires at %s, first %s; extended: %t, want %t", id, l.Expires, before[id].Expires, later, want)
			}
		}
		if _, err := s.RenewLeases(ctx, "r1", 0); err == nil {
			t.Error("a zero ttl was accepted")
		}
	})
}

func TestReleaseLeases(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		for _, l := range []struct{ session, replica string }{{"s1", "r1"}, {"s2", "r1"}, {"s3", "r1"}, {"s4", "r2"}} {
			if _, err := s.AcquireLease(ctx, l.session, l.replica, "host", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		// r2 cannot release r1's lease.
		if err := s.ReleaseLeases(ctx, "r2", "s1"); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseLeases(ctx, "r1", "s1"); err != nil {
			t.Fatal(err)
		}
		leased := func() []string {
			var out []string
			for _, id := range []string{"s1", "s2", "s3", "s4"} {
				l, err := s.SessionLease(ctx, id)
				if err != nil {
					t.Fatal(err) // a released lease stays, expired, naming its holder
				}
				if !l.Expired {
					out = append(out, id)
				}
			}
			return out
		}
		if got := leased(); !slices.Equal(got, []string{"s2", "s3", "s4"}) {
			t.Fatalf("leased after releasing s1 = %v", got)
		}
		if l, err := s.AcquireLease(ctx, "s1", "r2", "host", time.Minute); err != nil || l.Previous != "r1" {
			t.Errorf("acquiring a released lease = %+v, %v; want it taken from r1", l, err)
		}
		if err := s.ReleaseLeases(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		if got := leased(); !slices.Equal(got, []string{"s1", "s4"}) {
			t.Fatalf("leased after releasing all of r1's = %v, want r2's", got)
		}
	})
}

func TestDeleteSessionDeletesItsLease(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		if _, err := s.AcquireLease(ctx, "s1", "r1", "host", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSession(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SessionLease(ctx, "s1"); !errors.Is(err, ErrNoLease) {
			t.Errorf("SessionLease after DeleteSession: %v, want ErrNoLease", err)
		}
	})
}

// Replicas racing for one session's lease, over two stores on one database: in each
// period exactly one of them gets it, and each takes it over from the one before (who
// gave it up: a released lease is one that ran out, as far as the others go).
func TestAcquireLeaseRace(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		stores := [2]*Store{}
		stores[0], stores[1] = e.openReplicaStores(t)
		ctx := context.Background()
		const (
			replicas = 20
			periods  = 3
			ttl      = time.Minute
		)
		previous := ""
		for period := range periods {
			var (
				wg      sync.WaitGroup
				start   = make(chan struct{})
				mu      sync.Mutex
				winners []Lease
				holders = map[string]int{}
				errs    []error
			)
			for r := range replicas {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					l, err := stores[r%2].AcquireLease(ctx, "s", fmt.Sprintf("r%d", r), fmt.Sprintf("host%d", r), ttl)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						winners = append(winners, l)
					case errors.Is(err, ErrLeaseHeld):
						holders[l.Replica]++
					default:
						errs = append(errs, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("period %d: %v", period, errs)
			}
			if len(winners) != 1 {
				t.Fatalf("period %d: %d replicas got the lease: %+v", period, len(winners), winners)
			}
			w := winners[0]
			if holders[w.Replica] != replicas-1 || len(holders) != 1 {
				t.Errorf("period %d: the losers saw holders %v, want all %s", period, holders, w.Replica)
			}
			if w.Previous != previous {
				t.Errorf("period %d: %s took over from %q, want %q", period, w.Replica, w.Previous, previous)
			}
			previous = w.Replica
			if err := stores[0].ReleaseLeases(ctx, w.Replica, "s"); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A replica's append leaves out the events (and audit entries) of sessions whose lease
// another replica holds, and reports them; the other sessions', its own and agent events
// are written. Without a replica nothing is left out.
func TestAppendFencedLeavesOutSessionsHeldElsewhere(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		if _, err := s.AcquireLease(ctx, "taken", "other", "10.0.0.2:1", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireLease(ctx, "mine", "me", "10.0.0.1:1", time.Minute); err != nil {
			t.Fatal(err)
		}
		batch := []LoggedEvent{event(1, "taken"), event(2, "mine"), event(3, "unleased"), event(4, ""), event(5, "taken")}
		audit := []AuditEntry{{Time: time.Now(), Kind: 1, SessionID: "taken"}, {Time: time.Now(), Kind: 1, SessionID: "mine"}}
		fenced, err := s.AppendFenced(ctx, batch, audit, "me")
		if err != nil {
			t.Fatal(err)
		}
		logged, err := s.ReadEvents(ctx, 0, 0, EventFilter{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, ev := range logged {
			seqs = append(seqs, ev.Sequence)
		}
		entries, err := s.AuditEntries(ctx, AuditFilter{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		want, wantFenced, wantEntries := []uint64{2, 3, 4}, []string{"taken"}, 1
		if e.name == "sqlite" { // one machine, one replica: nothing to fence
			want, wantFenced, wantEntries = []uint64{1, 2, 3, 4, 5}, nil, 2
		}
		if !slices.Equal(seqs, want) || !slices.Equal(fenced, wantFenced) || len(entries) != wantEntries {
			t.Errorf("logged %v, fenced %v, %d audit entries; want %v, %v, %d", seqs, fenced, len(entries), want, wantFenced, wantEntries)
		}
		fenced, err = s.AppendFenced(ctx, []LoggedEvent{event(6, "taken")}, nil, "")
		if err != nil || len(fenced) != 0 {
			t.Errorf("an append with no replica: fenced %v, %v; want nothing left out", fenced, err)
		}
		// A lease its holder gave up still names it: the fence holds.
		if err := s.ReleaseLeases(ctx, "other", "taken"); err != nil {
			t.Fatal(err)
		}
		fenced, err = s.AppendFenced(ctx, []LoggedEvent{event(7, "taken")}, nil, "me")
		if e.name == "postgres" && (err != nil || !slices.Equal(fenced, []string{"taken"})) {
			t.Errorf("after the other replica released the session: fenced %v, %v; want it left out still", fenced, err)
		}
	})
}

// A replica's message writes for a session another replica took over fail with
// ErrFenced and change nothing; its own sessions' writes, and those of sessions no lease
// names, go through.
func TestMessageWritesAreFenced(t *testing.T) {
	s, _ := engines[1].openStore(t)
	ctx := context.Background()
	for _, id := range []string{"mine", "taken", "free"} {
		if err := s.CreateConversation(ctx, Conversation{ID: id, AgentID: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	s.FenceMessages("me")
	if _, err := s.AcquireLease(ctx, "mine", "me", "host:1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, "taken", "other", "host:2", time.Minute); err != nil {
		t.Fatal(err)
	}
	msg := func(session, id string) presenters.Message {
		return presenters.Message{ID: id, SessionID: session, Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: "text"}}}
	}
	for _, session := range []string{"mine", "free"} {
		if err := s.SaveMessage(ctx, msg(session, session+"-1")); err != nil {
			t.Errorf("a write for session %s: %v", session, err)
		}
	}
	err := s.UpdateMessages(ctx, MessageUpdate{Message: msg("mine", "mine-2")}, MessageUpdate{Message: msg("taken", "taken-1")})
	if !errors.Is(err, ErrFenced) {
		t.Errorf("a write with a message of a session taken over: %v, want ErrFenced", err)
	}
	if n, _ := s.CountMessages(ctx, "mine"); n != 1 {
		t.Errorf("session mine holds %d messages after a fenced write, want 1 (all or nothing)", n)
	}
	if n, _ := s.CountMessages(ctx, "taken"); n != 0 {
		t.Errorf("session taken holds %d messages, want none", n)
	}
}

// A reply stored finished whose MESSAGE_END never reached the log is found, marked
// incomplete and cut to what the log holds.
func TestUnendedMessagesAreCutToTheLog(t *testing.T) {
	s, _ := engines[1].openStore(t)
	ctx := context.Background()
	if err := s.CreateConversation(ctx, Conversation{ID: "c", AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	save := func(id, text string) {
		t.Helper()
		if err := s.SaveMessage(ctx, presenters.Message{ID: id, SessionID: "c", Role: presenters.RoleAssistant, Status: presenters.MessageComplete,
			Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text}}}); err != nil {
			t.Fatal(err)
		}
	}
	save("ended", "all of it")
	save("unended", "shown, and more")
	save("unlogged", "nothing logged")
	events := []LoggedEvent{
		{Sequence: 1, SessionID: "c", AgentID: "a", Type: int(presenters.EventMessageDelta), MessageID: "ended", Time: time.Now()},
		{Sequence: 2, SessionID: "c", AgentID: "a", Type: int(presenters.EventMessageEnd), MessageID: "ended", Time: time.Now()},
		{Sequence: 3, SessionID: "c", AgentID: "a", Type: int(presenters.EventMessageDelta), MessageID: "unended", Time: time.Now()},
	}
	if err := s.AppendEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	unended, err := s.UnendedMessages(ctx, "c", 4)
	if err != nil || len(unended) != 1 || unended[0].MessageID != "unended" {
		t.Fatalf("UnendedMessages = %v, %v; want the one whose end is not logged", unended, err)
	}
	if err := s.MarkMessagesInterrupted(ctx, "c", unended); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CutMessageText(ctx, "c", "unended", "shown"); err != nil || n != len(", and more") {
		t.Fatalf("CutMessageText = %d, %v", n, err)
	}
	if n, err := s.CutMessageText(ctx, "c", "ended", "something else"); err != nil || n != 0 {
		t.Errorf("CutMessageText of a text that does not begin with it = %d, %v; want nothing cut", n, err)
	}
	msgs, err := s.Messages(ctx, "c", presenters.MessageQuery{MessageID: "unended"})
	if err != nil || len(msgs) != 1 {
		t.Fatal(msgs, err)
	}
	if m := msgs[0]; m.Status != presenters.MessageIncomplete || len(m.Blocks) != 1 || m.Blocks[0].Text != "shown" {
		t.Errorf("the unended reply is stored %s with %+v; want incomplete, \"shown\"", m.Status, m.Blocks)
	}
}

// A lease taken after waiting for a row lock (held by a fenced append that stalled)
// expires a ttl after it was taken, not after the statement began.
func TestLeaseExpiryCountsFromTheLock(t *testing.T) {
	s, db := engines[1].openStore(t)
	ctx := context.Background()
	if _, err := s.AcquireLease(ctx, "s1", "r1", "host:1", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitExpired(t, s, "s1")
	sqlDB, _ := db.DB()
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM session_leases WHERE session_id = 's1' FOR SHARE`); err != nil {
		t.Fatal(err)
	}
	const ttl = time.Second
	got := make(chan Lease, 1)
	go func() {
		l, err := s.AcquireLease(ctx, "s1", "r2", "host:2", ttl)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// Once the acquisition waits for the lock, the database's clock is read in the
	// transaction holding it, and the lock let go.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		// Outside tx: a transaction sees pg_stat_activity as it was when first read.
		if err := sqlDB.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO session_leases%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the acquisition does not wait for the lock")
		}
	}
	var released int64
	if err := tx.QueryRowContext(ctx, `SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000)::BIGINT`).Scan(&released); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback()
	l := <-got
	if want := time.Unix(0, released).Add(ttl); l.Expires.Before(want) {
		t.Errorf("the lease expires %s before a ttl after the lock was let go", want.Sub(l.Expires))
	}
}

// A replica's batch tried again after its commit landed (the answer was lost with the
// connection) is taken as landed: no error, nothing written twice, audit included.
func TestAppendFencedAgainAfterItLanded(t *testing.T) {
	s, _ := engines[1].openStore(t)
	ctx := context.Background()
	if _, err := s.AcquireLease(ctx, "mine", "me", "10.0.0.1:1", time.Minute); err != nil {
		t.Fatal(err)
	}
	batch := []LoggedEvent{event(1, "mine"), event(2, "mine")}
	audit := []AuditEntry{{Time: time.Now(), Kind: 1, SessionID: "mine"}}
	for try := 1; try <= 2; try++ {
		if _, err := s.AppendFenced(ctx, batch, audit, "me"); err != nil {
			t.Fatalf("append, try %d: %v", try, err)
		}
	}
	logged, err := s.ReadEvents(ctx, 0, 0, EventFilter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := s.AuditEntries(ctx, AuditFilter{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) != 2 || len(entries) != 1 {
		t.Errorf("after the same batch twice: %d events and %d audit entries logged, want 2 and 1", len(logged), len(entries))
	}
}
