package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

func TestSessionHeads(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		if heads, err := s.SessionHeads(ctx, EventFilter{}); err != nil || len(heads) != 0 {
			t.Fatalf("heads of an empty log = %v, %v", heads, err)
		}
		mustAppend(t, s, logEvents(1, 9, time.Unix(1_700_000_000, 0))) // odd: s1/a1 deltas, even: s2/a2
		for _, c := range []struct {
			name string
			f    EventFilter
			want map[string]uint64
		}{
			{"all", EventFilter{}, map[string]uint64{"s1": 9, "s2": 8}},
			{"named", EventFilter{SessionIDs: []string{"s2", "nope"}}, map[string]uint64{"s2": 8}},
			{"agent", EventFilter{AgentIDs: []string{"a1"}}, map[string]uint64{"s1": 9}},
			{"named and type", EventFilter{SessionIDs: []string{"s1", "s2"}, Types: []int{int(presenters.EventStatusChanged)}}, map[string]uint64{"s2": 8}},
		} {
			if heads, err := s.SessionHeads(ctx, c.f); err != nil || !maps.Equal(heads, c.want) {
				t.Errorf("%s: heads = %v, %v; want %v", c.name, heads, err, c.want)
			}
		}
		// More named sessions than one statement binds.
		var many []string
		for i := range idBatch + 3 {
			many = append(many, fmt.Sprintf("x%d", i))
		}
		many = append(many, "s1")
		if heads, err := s.SessionHeads(ctx, EventFilter{SessionIDs: many}); err != nil || !maps.Equal(heads, map[string]uint64{"s1": 9}) {
			t.Errorf("heads of %d named sessions = %v, %v", len(many), heads, err)
		}
	})
}

func TestReadSessionEvents(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		s, _ := e.openStore(t)
		ctx := context.Background()
		mustAppend(t, s, logEvents(1, 20, time.Unix(1_700_000_000, 0)))
		read := func(after map[string]uint64, f EventFilter, limit int) []uint64 {
			t.Helper()
			evs, err := s.ReadSessionEvents(ctx, after, f, limit)
			if err != nil {
				t.Fatal(err)
			}
			return loggedSequences(evs)
		}
		// Each session from its own point, merged in sequence order.
		if got, want := read(map[string]uint64{"s1": 13, "s2": 4}, EventFilter{}, 0), []uint64{6, 8, 10, 12, 14, 15, 16, 17, 18, 19, 20}; !slices.Equal(got, want) {
			t.Errorf("s1 after 13, s2 after 4: %v, want %v", got, want)
		}
		if got, want := read(map[string]uint64{"s1": 13, "s2": 4}, EventFilter{}, 3), []uint64{6, 8, 10}; !slices.Equal(got, want) {
			t.Errorf("limit 3: %v, want %v", got, want)
		}
		if got, want := read(map[string]uint64{"s1": 0, "s2": 0}, EventFilter{AgentIDs: []string{"a2"}}, 0), seqs(2, 20, 2); !slices.Equal(got, want) {
			t.Errorf("agent a2: %v, want %v", got, want)
		}
		if got := read(map[string]uint64{"s1": 0}, EventFilter{Types: []int{int(presenters.EventStatusChanged)}}, 0); len(got) != 0 {
			t.Errorf("s1's status events: %v, want none", got)
		}
		if got := read(map[string]uint64{"nope": 0}, EventFilter{}, 0); len(got) != 0 {
			t.Errorf("an unknown session: %v", got)
		}
		// More sessions than one statement reads: still merged in order, and limited.
		var batch []LoggedEvent
		after := map[string]uint64{}
		for i := range sessionsPerRead + 10 {
			id := fmt.Sprintf("m%03d", i)
			after[id] = 0
			batch = append(batch, LoggedEvent{Sequence: uint64(1000 - i), SessionID: id, AgentID: "a", Time: time.Unix(1_700_000_000, 0)})
		}
		mustAppend(t, s, batch)
		got := read(after, EventFilter{}, 5)
		if want := seqs(1000-sessionsPerRead-9, 1000-sessionsPerRead-5, 1); !slices.Equal(got, want) {
			t.Errorf("%d sessions, limit 5: %v, want %v", len(after), got, want)
		}
	})
}

// seqs is from, from+step, ... up to to.
func seqs(from, to, step uint64) []uint64 {
	var out []uint64
	for seq := from; seq <= to; seq += step {
		out = append(out, seq)
	}
	return out
}
