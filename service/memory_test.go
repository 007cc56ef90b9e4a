package service

import (
	"testing"
	"time"
)

// A timed memory recalls what it keeps until keep has passed, holds at most most
// entries, and forgets the oldest first; keeping a key again makes it the newest.
func TestTimedMemory(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := newTimedMemory[string, int](time.Minute, 2)
	m.remember("a", 1, now)
	m.remember("b", 2, now.Add(time.Second))
	if v, ok := m.recall("a", now.Add(time.Second)); !ok || v != 1 {
		t.Fatalf("a: %d, %v", v, ok)
	}
	m.remember("a", 3, now.Add(2*time.Second)) // a is the newest now
	m.remember("c", 4, now.Add(3*time.Second)) // b, the oldest, goes
	if _, ok := m.recall("b", now.Add(3*time.Second)); ok {
		t.Error("b outlived the bound")
	}
	if v, ok := m.recall("a", now.Add(3*time.Second)); !ok || v != 3 {
		t.Errorf("a, kept again: %d, %v", v, ok)
	}
	if _, ok := m.recall("a", now.Add(2*time.Second+time.Minute)); ok {
		t.Error("a is recalled a whole keep after it was kept")
	}
	m.remember("d", 5, now.Add(2*time.Minute)) // a and c are too old by now
	if len(m.byKey) != 1 || m.order.Len() != 1 {
		t.Errorf("%d keys and %d entries after the old ones expired, want 1", len(m.byKey), m.order.Len())
	}
}
