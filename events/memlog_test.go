package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
)

// memLog is one database's event log and sequence floor, in memory, for several hubs.
// An append wakes the tails of the hubs in wakes, as the store's notifications do.
type memLog struct {
	mu     sync.Mutex
	events []LoggedEvent // in sequence order
	floor  uint64
	wakes  []*testHub
	// duringRead, when set, runs in each read of a tail after the read has taken what the
	// log holds: what it appends lands while the read is under way.
	duringRead func()
}

// wake adds hubs whose tails appends wake.
func (l *memLog) wake(hubs ...*testHub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakes = append(l.wakes, hubs...)
}

func (l *memLog) AppendEvents(_ context.Context, batch []LoggedEvent) error {
	l.mu.Lock()
	for _, ev := range batch {
		i, found := slices.BinarySearchFunc(l.events, ev.Sequence, func(e LoggedEvent, seq uint64) int { return cmp.Compare(e.Sequence, seq) })
		if found {
			l.mu.Unlock()
			return fmt.Errorf("sequence %d is logged already", ev.Sequence)
		}
		l.events = slices.Insert(l.events, i, ev)
	}
	hubs := slices.Clone(l.wakes)
	l.mu.Unlock()
	sessions := map[string]bool{}
	for _, ev := range batch {
		sessions[ev.SessionID] = true
	}
	for _, h := range hubs {
		h.WakeTails(slices.Collect(maps.Keys(sessions)), false)
	}
	return nil
}

// readHook runs duringRead, without the lock.
func (l *memLog) readHook() {
	l.mu.Lock()
	hook := l.duringRead
	l.mu.Unlock()
	if hook != nil {
		hook()
	}
}

func memMatches(f Filter, ev LoggedEvent) bool {
	return (len(f.SessionIDs) == 0 || slices.Contains(f.SessionIDs, ev.SessionID)) &&
		(len(f.AgentIDs) == 0 || slices.Contains(f.AgentIDs, ev.AgentID)) &&
		(len(f.Types) == 0 || slices.Contains(f.Types, ev.Type))
}

func (l *memLog) ReadEvents(_ context.Context, after, until uint64, f Filter, limit int) ([]LoggedEvent, error) {
	l.mu.Lock()
	var out []LoggedEvent
	for _, ev := range l.events {
		if ev.Sequence > after && (until == 0 || ev.Sequence <= until) && memMatches(f, ev) && (limit <= 0 || len(out) < limit) {
			out = append(out, ev)
		}
	}
	l.mu.Unlock()
	l.readHook()
	return out, nil
}

func (l *memLog) EventLogRange(context.Context) (uint64, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		return 0, 0, nil
	}
	return l.events[0].Sequence, l.events[len(l.events)-1].Sequence, nil
}

// PruneEvents keeps the newest MaxEvents.
func (l *memLog) PruneEvents(_ context.Context, r LogRetention) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.MaxEvents <= 0 || int64(len(l.events)) <= r.MaxEvents {
		return 0, nil
	}
	n := int64(len(l.events)) - r.MaxEvents
	l.events = slices.Delete(l.events, 0, int(n))
	return n, nil
}

func (l *memLog) SessionHeads(_ context.Context, f Filter) (map[string]uint64, error) {
	l.mu.Lock()
	heads := map[string]uint64{}
	for _, ev := range l.events {
		if memMatches(f, ev) {
			heads[ev.SessionID] = ev.Sequence
		}
	}
	l.mu.Unlock()
	l.readHook()
	return heads, nil
}

func (l *memLog) ReadSessionEvents(_ context.Context, after map[string]uint64, f Filter, limit int) ([]LoggedEvent, error) {
	l.mu.Lock()
	var out []LoggedEvent
	for _, ev := range l.events {
		if c, ok := after[ev.SessionID]; ok && ev.Sequence > c && memMatches(f, ev) && (limit <= 0 || len(out) < limit) {
			out = append(out, ev)
		}
	}
	l.mu.Unlock()
	l.readHook()
	return out, nil
}

func (l *memLog) SequenceFloor(context.Context) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.floor, nil
}

func (l *memLog) SetSequenceFloor(_ context.Context, floor uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.floor = max(l.floor, floor)
	return nil
}

// ReserveSequences counts from the floor, or the log's newest when above it, as the store
// does.
func (l *memLog) ReserveSequences(_ context.Context, n uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) > 0 {
		l.floor = max(l.floor, l.events[len(l.events)-1].Sequence)
	}
	l.floor += n
	return l.floor - n + 1, nil
}

// flakyReserver fails its reservations while failing is set.
type flakyReserver struct {
	*memLog
	mu       sync.Mutex
	failing  bool
	attempts int
}

func (r *flakyReserver) setFailing(failing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = failing
}

func (r *flakyReserver) ReserveSequences(ctx context.Context, n uint64) (uint64, error) {
	r.mu.Lock()
	r.attempts++
	failing := r.failing
	r.mu.Unlock()
	if failing {
		return 0, errors.New("connection refused")
	}
	return r.memLog.ReserveSequences(ctx, n)
}

// newMemHub is a hub with exclusive blocks of block sequences on log, logging to it.
func newMemHub(t testing.TB, log *memLog, block uint64, opts Options[*encodedTest]) *testHub {
	t.Helper()
	if opts.Store == nil {
		opts.Store = log
	}
	opts.ExclusiveBlocks, opts.SequenceBlock = true, block
	opts.Log, opts.Marshal, opts.Unmarshal = log, marshalTest, unmarshalTest
	if opts.Logger == nil {
		opts.Logger = discard
	}
	return newTestHub(t, opts)
}

// tries is how many reservations were asked for so far.
func (r *flakyReserver) tries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}
