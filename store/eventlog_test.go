package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// logEvents makes events from..to: odd sequences in session s1 (agent a1, deltas of message
// m1), even ones in s2 (agent a2, type 14 and no message).
func logEvents(from, to uint64, at time.Time) []LoggedEvent {
	var out []LoggedEvent
	for seq := from; seq <= to; seq++ {
		ev := LoggedEvent{Sequence: seq, SessionID: "s1", AgentID: "a1", Type: int(presenters.EventMessageDelta), MessageID: "m1",
			Time: at.Add(time.Duration(seq) * time.Millisecond), Data: fmt.Appendf(nil, "event %d", seq)}
		if seq%2 == 0 {
			ev.SessionID, ev.AgentID, ev.Type, ev.MessageID = "s2", "a2", int(presenters.EventStatusChanged), ""
		}
		out = append(out, ev)
	}
	return out
}

func loggedSequences(evs []LoggedEvent) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Sequence
	}
	return out
}

func mustAppend(t *testing.T, s *Store, batch []LoggedEvent) {
	t.Helper()
	if err := s.AppendEvents(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
}

func TestEventLogAppendAndRead(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		if oldest, newest, err := s.EventLogRange(ctx); err != nil || oldest != 0 || newest != 0 {
			t.Fatalf("range of an empty log = %d, %d, %v; want 0, 0", oldest, newest, err)
		}
		at := time.Unix(1_700_000_000, 123)
		mustAppend(t, s, logEvents(1, 10, at))
		mustAppend(t, s, logEvents(11, 12, at))
		if oldest, newest, err := s.EventLogRange(ctx); err != nil || oldest != 1 || newest != 12 {
			t.Fatalf("range = %d, %d, %v; want 1, 12", oldest, newest, err)
		}

		all, err := s.ReadEvents(ctx, 0, 0, EventFilter{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := logEvents(1, 12, at)
		if len(all) != len(want) {
			t.Fatalf("read %v, want 1..12", loggedSequences(all))
		}
		for i, ev := range all {
			w := want[i]
			if ev.Sequence != w.Sequence || ev.SessionID != w.SessionID || ev.AgentID != w.AgentID || ev.Type != w.Type ||
				ev.MessageID != w.MessageID || !ev.Time.Equal(w.Time) || !bytes.Equal(ev.Data, w.Data) {
				t.Errorf("event %d read back as %+v, want %+v", i, ev, w)
			}
		}

		cases := []struct {
			name         string
			after, until uint64
			f            EventFilter
			limit        int
			want         []uint64
		}{
			{"bounds", 3, 6, EventFilter{}, 0, []uint64{4, 5, 6}},
			{"limit", 3, 0, EventFilter{}, 2, []uint64{4, 5}},
			{"session", 0, 0, EventFilter{SessionIDs: []string{"s1"}}, 0, []uint64{1, 3, 5, 7, 9, 11}},
			{"agent and bounds", 4, 9, EventFilter{AgentIDs: []string{"a2"}}, 0, []uint64{6, 8}},
			{"type", 8, 0, EventFilter{Types: []int{int(presenters.EventStatusChanged)}}, 0, []uint64{10, 12}},
			{"every list must match", 0, 0, EventFilter{SessionIDs: []string{"s1"}, AgentIDs: []string{"a2"}}, 0, nil},
			{"several ids", 9, 0, EventFilter{SessionIDs: []string{"s1", "s2"}}, 0, []uint64{10, 11, 12}},
			{"past the newest", 12, 0, EventFilter{}, 0, nil},
		}
		for _, c := range cases {
			got, err := s.ReadEvents(ctx, c.after, c.until, c.f, c.limit)
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			if seqs := loggedSequences(got); !slices.Equal(seqs, c.want) && (len(seqs) != 0 || len(c.want) != 0) {
				t.Errorf("%s: read %v, want %v", c.name, seqs, c.want)
			}
		}

		// A batch is all or nothing: one sequence already logged fails the whole of it.
		if err := s.AppendEvents(ctx, logEvents(12, 14, at)); err == nil {
			t.Fatal("appending a logged sequence again succeeded")
		}
		if _, newest, _ := s.EventLogRange(ctx); newest != 12 {
			t.Errorf("after a failed batch the newest is %d, want 12: part of the batch was written", newest)
		}
	})
}

// A batch of any size lands whole and in order, however it is cut into statements (one
// per power of two below appendRows, whole appendRows chunks before), with its audit
// entries.
func TestEventLogBatchesOfEverySize(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		at := time.Unix(1_700_000_000, 0)
		next := uint64(1)
		for _, n := range []int{1, 2, 3, 7, 8, 9, 255, 256, 257, 2*appendRows + 100} {
			batch := logEvents(next, next+uint64(n)-1, at)
			audit := []AuditEntry{{Time: at, Kind: 1, SessionID: "s1", AgentID: "a1", Data: fmt.Appendf(nil, "audit of batch %d", n)}}
			if _, err := s.AppendFenced(ctx, batch, audit, ""); err != nil {
				t.Fatalf("batch of %d: %v", n, err)
			}
			got, err := s.ReadEvents(ctx, next-1, 0, EventFilter{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != n {
				t.Fatalf("batch of %d: read %d events back", n, len(got))
			}
			for i, ev := range got {
				if w := batch[i]; ev.Sequence != w.Sequence || ev.SessionID != w.SessionID || !bytes.Equal(ev.Data, w.Data) {
					t.Fatalf("batch of %d: event %d read back as %+v, want %+v", n, i, ev, w)
				}
			}
			entries, err := s.AuditEntries(ctx, AuditFilter{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if last := entries[len(entries)-1]; !bytes.Equal(last.Data, audit[0].Data) {
				t.Fatalf("batch of %d: the last audit entry is %q", n, last.Data)
			}
			next += uint64(n)
		}
	})
}

func TestMessageEvents(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustAppend(t, s, logEvents(1, 7, time.Now()))
		got, err := s.MessageEvents(ctx, "s1", "m1")
		if err != nil {
			t.Fatal(err)
		}
		if seqs := loggedSequences(got); !slices.Equal(seqs, []uint64{1, 3, 5, 7}) {
			t.Errorf("events of m1 = %v, want 1 3 5 7", seqs)
		}
		if got, err := s.MessageEvents(ctx, "s2", "m1"); err != nil || len(got) != 0 {
			t.Errorf("events of m1 in another session = %v, %v; want none", got, err)
		}
		if got, err := s.MessageEvents(ctx, "s1", "other"); err != nil || len(got) != 0 {
			t.Errorf("events of an unknown message = %v, %v; want none", got, err)
		}
		if _, err := s.MessageEvents(ctx, "s1", ""); err == nil {
			t.Error("events of the empty message id: no error")
		}
	})
}

func TestPruneEvents(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		now := time.Now()
		cases := []struct {
			name       string
			maxEvents  int64
			maxBytes   int64
			maxAge     time.Duration
			wantOldest uint64
		}{
			{"no bounds", 0, 0, 0, 1},
			{"by count", 40, 0, 0, 61},
			{"by count, with a gap a restart left", 40, 0, 0, 1061},
			// Every event's data is "event N": 8 bytes for 10..99, 9 for 100; 11 events fit in 95.
			{"by bytes", 0, 95, 0, 90},
			{"by age", 0, 0, time.Hour, 51},
			{"every event too old", 0, 0, time.Minute, 0},
			{"the tightest bound wins", 70, 1 << 20, time.Hour, 51},
			{"within every bound", 1000, 1 << 20, 24 * time.Hour, 1},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s, _ := e.openStore(t)
				// 100 events, the first 50 two hours old, the others ten minutes.
				old := logEvents(1, 50, now.Add(-2*time.Hour))
				young := logEvents(51, 100, now.Add(-10*time.Minute))
				if c.name == "by count, with a gap a restart left" {
					for i := range young {
						young[i].Sequence += 1000 // 1051..1100
					}
				}
				mustAppend(t, s, old)
				mustAppend(t, s, young)
				// The bytes bound is checked against the file first: make the case count.
				if c.name == "by bytes" {
					var data int64
					if err := s.db.Raw(`SELECT SUM(length(data)) FROM event_log`).Row().Scan(&data); err != nil || data <= c.maxBytes {
						t.Fatalf("the log's data is %d bytes (%v), not over the bound", data, err)
					}
				}
				n, err := s.PruneEvents(ctx, c.maxEvents, c.maxBytes, c.maxAge)
				if err != nil {
					t.Fatal(err)
				}
				oldest, newest, err := s.EventLogRange(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if oldest != c.wantOldest {
					t.Errorf("oldest after pruning = %d (%d deleted), want %d", oldest, n, c.wantOldest)
				}
				var left int64
				if err := s.db.Raw(`SELECT COUNT(*) FROM event_log`).Row().Scan(&left); err != nil {
					t.Fatal(err)
				}
				if left+n != 100 {
					t.Errorf("%d deleted and %d left, of 100", n, left)
				}
				if left > 0 && newest != young[len(young)-1].Sequence {
					t.Errorf("newest after pruning = %d: pruning must only take the oldest", newest)
				}
				if c.maxEvents > 0 && left > c.maxEvents {
					t.Errorf("%d events left, over the bound of %d", left, c.maxEvents)
				}
			})
		}
	})
}

// Pruning a large backlog goes in several transactions and still takes all of it.
func TestPruneEventsInChunks(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		const n = pruneRows*2 + 10
		mustAppend(t, s, logEvents(1, n, time.Now()))
		deleted, err := s.PruneEvents(context.Background(), 5, 0, 0)
		if err != nil || deleted != n-5 {
			t.Fatalf("PruneEvents = %d, %v; want %d", deleted, err, n-5)
		}
		if oldest, newest, _ := s.EventLogRange(context.Background()); oldest != n-4 || newest != n {
			t.Errorf("range after pruning = %d..%d, want %d..%d", oldest, newest, n-4, n)
		}
	})
}

// What a crash leaves: the database and its WAL as they were mid-write, the WAL cut
// inside the last batch. The database opens, and holds every batch committed before
// that one whole, and nothing of it.
func TestEventLogSurvivesATornBatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agenticd.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	const batch = 200
	at := time.Now()
	var sizes []int64
	for b := range 3 {
		mustAppend(t, s, logEvents(uint64(b*batch+1), uint64((b+1)*batch), at))
		sizes = append(sizes, walSize())
	}
	if sizes[1] <= sizes[0] || sizes[2] <= sizes[1] {
		t.Fatalf("the WAL did not grow with each batch (%v): checkpointed meanwhile?", sizes)
	}
	for _, cut := range []struct {
		name string
		size int64
	}{
		{"cut in the middle of the last batch", (sizes[1] + sizes[2]) / 2},
		{"cut just before the last batch's commit", sizes[2] - 1},
	} {
		t.Run(cut.name, func(t *testing.T) {
			copyDir := t.TempDir()
			copyPath := filepath.Join(copyDir, "agenticd.db")
			copyFile(t, path, copyPath, -1)
			copyFile(t, path+"-wal", copyPath+"-wal", cut.size)
			c, err := Open(context.Background(), copyPath)
			if err != nil {
				t.Fatalf("the database does not open after a torn batch: %v", err)
			}
			defer func() { _ = c.Close() }()
			got, err := c.ReadEvents(context.Background(), 0, 0, EventFilter{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2*batch {
				t.Fatalf("%d events after the cut, want the %d of the two whole batches", len(got), 2*batch)
			}
			for i, ev := range got {
				if ev.Sequence != uint64(i+1) || string(ev.Data) != fmt.Sprintf("event %d", i+1) {
					t.Fatalf("event %d read back as %d %q", i+1, ev.Sequence, ev.Data)
				}
			}
		})
	}
}

// copyFile copies src to dst, only its first size bytes when size >= 0.
func copyFile(t *testing.T, src, dst string, size int64) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = in
	if size >= 0 {
		r = io.LimitReader(in, size)
	}
	if _, err := io.Copy(out, r); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
