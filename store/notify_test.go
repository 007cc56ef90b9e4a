package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agenticd/agenticd/internal/pgtest"
)

// wakeCall is one call of ListenEvents' wake.
type wakeCall struct {
	ids []string
	all bool
}

var wokeAll = wakeCall{all: true}

// openNotifyStores opens two stores on a new Postgres database of their own: channels are
// per database, and other tests append on the shared one.
func openNotifyStores(t *testing.T) (writer, listener *Store) {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	for _, s := range []**Store{&writer, &listener} {
		var err error
		if *s, err = OpenOnPostgres(context.Background(), dsn); err != nil {
			t.Fatal(err)
		}
		st := *s
		t.Cleanup(func() { _ = st.Close() })
	}
	return writer, listener
}

// startListening runs s.ListenEvents until stop is called or the test ends, and returns
// its wake calls once it listens (its first wake).
func startListening(t *testing.T, s *Store) (wakes <-chan wakeCall, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan wakeCall, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.ListenEvents(ctx, slog.Default(), func(ids []string, all bool) {
			select {
			case calls <- wakeCall{ids, all}:
			case <-ctx.Done():
			}
		})
	}()
	stop = func() error {
		cancel() // ListenEvents returns once its context ends; a hang is the test's timeout
		err := <-done
		done <- err
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("ListenEvents: %v", err)
		}
	})
	expectWake(t, calls, wokeAll)
	return calls, stop
}

func expectWake(t *testing.T, wakes <-chan wakeCall, want wakeCall) {
	t.Helper()
	// A wake that never comes is the test's timeout, with every goroutine's stack.
	if got := <-wakes; !reflect.DeepEqual(got, want) {
		t.Fatalf("wake(%q, %t), want wake(%q, %t)", got.ids, got.all, want.ids, want.all)
	}
}

func event(seq uint64, sessionID string) LoggedEvent {
	return LoggedEvent{Sequence: seq, SessionID: sessionID, AgentID: "a1", Type: 5, Time: time.Unix(0, int64(seq)), Data: []byte("x")}
}

func TestListenEventsWakesWithTheBatchSessions(t *testing.T) {
	writer, listener := openNotifyStores(t)
	wakes, _ := startListening(t, listener)
	mustAppend(t, writer, []LoggedEvent{event(1, "s1"), event(2, "s2"), event(3, "s1"), event(4, "")})
	expectWake(t, wakes, wakeCall{ids: []string{"s1", "s2", ""}})
	mustAppend(t, writer, []LoggedEvent{event(5, "")})
	expectWake(t, wakes, wakeCall{ids: []string{""}})
	// A store hears its own appends too.
	mustAppend(t, listener, []LoggedEvent{event(6, "s3")})
	expectWake(t, wakes, wakeCall{ids: []string{"s3"}})
}

func TestListenEventsIgnoresRolledBackAppends(t *testing.T) {
	writer, listener := openNotifyStores(t)
	wakes, _ := startListening(t, listener)
	mustAppend(t, writer, []LoggedEvent{event(1, "s1")})
	expectWake(t, wakes, wakeCall{ids: []string{"s1"}})
	// Sequence 1 is logged already: the batch fails, after its notification was queued.
	if err := writer.AppendEvents(context.Background(), []LoggedEvent{event(2, "s2"), event(1, "s2")}); err == nil {
		t.Fatal("a batch repeating a logged sequence was appended")
	}
	mustAppend(t, writer, []LoggedEvent{event(3, "s3")})
	expectWake(t, wakes, wakeCall{ids: []string{"s3"}})
}

func TestListenEventsWakesAllForALongBatch(t *testing.T) {
	writer, listener := openNotifyStores(t)
	wakes, _ := startListening(t, listener)
	var batch []LoggedEvent
	for i := range 300 {
		batch = append(batch, event(uint64(i+1), fmt.Sprintf("session-%030d", i)))
	}
	mustAppend(t, writer, batch)
	expectWake(t, wakes, wokeAll)
}

func TestNotifyPayload(t *testing.T) {
	sessions := func(ids ...string) []LoggedEvent {
		var out []LoggedEvent
		for i, id := range ids {
			out = append(out, event(uint64(i), id))
		}
		return out
	}
	fits := strings.Repeat("x", maxNotifyPayload-2)
	for _, c := range []struct {
		batch []LoggedEvent
		want  string
	}{
		{sessions("a", "b", "a", "c", "b"), "a,b,c"},
		{sessions(""), ""},
		{sessions("a", "", "a", ""), "a,"},
		{sessions("", "a"), ",a"},
		{sessions(fits, "y"), fits + ",y"},
		{sessions(fits, "yz"), "*"},
		{sessions("a", "b,c"), "*"},
	} {
		if got := notifyPayload(batchSessions(c.batch)); got != c.want {
			t.Errorf("notifyPayload(%d events) = %.40q (%d bytes), want %.40q", len(c.batch), got, len(got), c.want)
		}
	}
}

// A listener whose connection the server closes connects again, says that it may have
// missed appends, and hears the next ones; it logs the outage once.
func TestListenEventsReconnects(t *testing.T) {
	var logs bytes.Buffer
	defaultLogger := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(defaultLogger) })

	writer, listener := openNotifyStores(t)
	wakes, stop := startListening(t, listener)
	for round := 1; round <= 2; round++ {
		var killed bool
		err := writer.db.Raw(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN ` + eventsChannel + `'`).Row().Scan(&killed)
		if err != nil || !killed {
			t.Fatalf("terminate the listener's connection: %t, %v", killed, err)
		}
		expectWake(t, wakes, wokeAll)
		mustAppend(t, writer, []LoggedEvent{event(uint64(round), "s1")})
		expectWake(t, wakes, wakeCall{ids: []string{"s1"}})
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if lost, back := strings.Count(logs.String(), "lost the event log's notifications"), strings.Count(logs.String(), "notifications again"); lost != 2 || back != 2 {
		t.Errorf("logged %d outages and %d recoveries, want 2 of each:\n%s", lost, back, logs.String())
	}
}

func TestListenEventsReturnsWhenItsContextEnds(t *testing.T) {
	_, listener := openNotifyStores(t)
	_, stop := startListening(t, listener)
	if err := stop(); err != nil { // stop fails when ListenEvents does not return
		t.Fatalf("ListenEvents = %v, want nil", err)
	}
}

func TestListenEventsNeedsPostgres(t *testing.T) {
	s, _ := openStore(t)
	err := s.ListenEvents(context.Background(), slog.Default(), func([]string, bool) { t.Error("woken on SQLite") })
	if !errors.Is(err, ErrNotPostgres) {
		t.Fatalf("ListenEvents on SQLite = %v, want ErrNotPostgres", err)
	}
}

// A listener whose connection goes silent, neither closed nor answering, notices it by
// a ping once no notification came for a while, connects again, says that it may have
// missed appends, and hears the next ones. Pings that succeed wake nothing.
func TestListenEventsPingsASilentConnection(t *testing.T) {
	interval, timeout := listenPingInterval, listenPingTimeout
	t.Cleanup(func() { listenPingInterval, listenPingTimeout = interval, timeout }) // after ListenEvents stops
	// A short interval, and a timeout a slow machine's ping stays well within.
	listenPingInterval, listenPingTimeout = 100*time.Millisecond, 2*time.Second

	dsn := pgtest.Shared(t).NewDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := pgtest.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	var writer, listener *Store
	for s, dsn := range map[**Store]string{&writer: dsn, &listener: u.String()} {
		if *s, err = OpenOnPostgres(context.Background(), dsn); err != nil {
			t.Fatal(err)
		}
		st := *s
		t.Cleanup(func() { _ = st.Close() })
	}
	// Once ListenEvents returned, and before the stores close: a silent connection of the
	// listener's pool would hold its Close up.
	t.Cleanup(proxy.CloseConns)
	wakes, _ := startListening(t, listener)
	select {
	case w := <-wakes:
		t.Fatalf("wake(%q, %t) with nothing appended, while pings succeed", w.ids, w.all)
	case <-time.After(5 * listenPingInterval):
	}
	mustAppend(t, writer, []LoggedEvent{event(1, "s1")})
	expectWake(t, wakes, wakeCall{ids: []string{"s1"}})

	proxy.Silence()
	expectWake(t, wakes, wokeAll)
	mustAppend(t, writer, []LoggedEvent{event(2, "s2")})
	expectWake(t, wakes, wakeCall{ids: []string{"s2"}})
}
