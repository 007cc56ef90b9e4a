package store

import (
	"context"
	"testing"
	"time"
)

// An audit entry is stored with its events or not at all.
func TestAuditEntriesGoWithTheirEvents(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		st, _ := e.openStore(t)
		now := time.Now()
		entry := AuditEntry{Time: now, Kind: 5, SessionID: "s", AgentID: "a", Data: []byte("e1")}
		if _, err := st.AppendFenced(ctx, []LoggedEvent{{Sequence: 1, SessionID: "s", AgentID: "a", Type: 10, Time: now, Data: []byte("x")}}, []AuditEntry{entry}, ""); err != nil {
			t.Fatal(err)
		}
		// Sequence 1 again: the batch fails, and its audit entry must not stay.
		entry.Data = []byte("e2")
		if _, err := st.AppendFenced(ctx, []LoggedEvent{{Sequence: 1, SessionID: "s", AgentID: "a", Type: 10, Time: now, Data: []byte("y")}}, []AuditEntry{entry}, ""); err == nil {
			t.Fatal("a batch with a logged sequence was appended")
		}
		got, err := st.AuditEntries(ctx, AuditFilter{}, 0)
		if err != nil || len(got) != 1 || string(got[0].Data) != "e1" || got[0].ID == 0 {
			t.Fatalf("audit log %+v, %v; want only the first batch's entry", got, err)
		}
	})
}

func TestAuditFiltersAndRetention(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		st, _ := e.openStore(t)
		base := time.Now().Add(-48 * time.Hour)
		var entries []AuditEntry
		var events []LoggedEvent
		for i := range 10 {
			entries = append(entries, AuditEntry{Time: base.Add(time.Duration(i) * time.Hour), Kind: 1 + i%3, SessionID: []string{"s1", "s2"}[i%2], AgentID: "a", Data: []byte{byte(i)}})
			events = append(events, LoggedEvent{Sequence: uint64(i + 1), SessionID: "s", AgentID: "a", Type: 1, Time: base, Data: []byte("x")})
		}
		if _, err := st.AppendFenced(ctx, events, entries, ""); err != nil {
			t.Fatal(err)
		}
		count := func(f AuditFilter) int {
			got, err := st.AuditEntries(ctx, f, 0)
			if err != nil {
				t.Fatal(err)
			}
			return len(got)
		}
		for name, tc := range map[string]struct {
			f    AuditFilter
			want int
		}{
			"all":        {AuditFilter{}, 10},
			"session":    {AuditFilter{SessionIDs: []string{"s1"}}, 5},
			"kinds":      {AuditFilter{Kinds: []int{1, 2}}, 7},
			"time range": {AuditFilter{Start: base.Add(2 * time.Hour), End: base.Add(5 * time.Hour)}, 3},
			"after id":   {AuditFilter{AfterID: 7}, 3},
			"agent":      {AuditFilter{AgentIDs: []string{"b"}}, 0},
		} {
			if got := count(tc.f); got != tc.want {
				t.Errorf("%s: %d entries, want %d", name, got, tc.want)
			}
		}
		// The oldest go first: by count, then by age (entries are 48h to 39h old, an hour
		// apart; the one of 42h is a little older by now).
		if n, err := st.PruneAudit(ctx, 8, 0); err != nil || n != 2 {
			t.Fatalf("prune to 8: %d, %v", n, err)
		}
		if n, err := st.PruneAudit(ctx, 0, 42*time.Hour); err != nil || n != 5 {
			t.Fatalf("prune older than 42h: %d, %v", n, err)
		}
		if got := count(AuditFilter{}); got != 3 {
			t.Errorf("%d entries left, want 3", got)
		}
		if n, err := st.PruneAudit(ctx, 0, time.Hour); err != nil || n != 3 || count(AuditFilter{}) != 0 {
			t.Errorf("prune all: %d, %v", n, err)
		}
	})
}

// Entries made of no event (a webhook's deliveries) are appended on their own.
func TestAppendAuditAlone(t *testing.T) {
	onEachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		st, _ := e.openStore(t)
		now := time.Now()
		if err := st.AppendAudit(ctx, []AuditEntry{{Time: now, Kind: 12, SessionID: "s", AgentID: "a", Data: []byte("d1")}, {Time: now, Kind: 12, Data: []byte("d2")}}); err != nil {
			t.Fatal(err)
		}
		got, err := st.AuditEntries(ctx, AuditFilter{Kinds: []int{12}}, 0)
		if err != nil || len(got) != 2 || string(got[0].Data) != "d1" || got[1].SessionID != "" {
			t.Fatalf("audit log %+v, %v; want both entries", got, err)
		}
	})
}
