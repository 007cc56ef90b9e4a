package service

import (
	"container/list"
	"time"
)

// timedMemory remembers values by key for a while (keep) and at most most of them,
// forgetting the oldest first: the projection's permission decisions and elicitation
// resolutions, so that an answer repeated later meets the same outcome. The caller
// says what time it is; it is not safe for concurrent use.
type timedMemory[K comparable, V any] struct {
	keep  time.Duration
	most  int
	byKey map[K]*list.Element // of timedEntry[K, V], in order
	order *list.List          // oldest first
}

type timedEntry[K comparable, V any] struct {
	key K
	val V
	at  time.Time
}

func newTimedMemory[K comparable, V any](keep time.Duration, most int) *timedMemory[K, V] {
	return &timedMemory[K, V]{keep: keep, most: most, byKey: make(map[K]*list.Element), order: list.New()}
}

// remember keeps v under k as the newest, and forgets what is too old or too many.
func (m *timedMemory[K, V]) remember(k K, v V, now time.Time) {
	if e, ok := m.byKey[k]; ok {
		m.order.Remove(e)
	}
	m.byKey[k] = m.order.PushBack(timedEntry[K, V]{key: k, val: v, at: now})
	cutoff := now.Add(-m.keep)
	for e := m.order.Front(); e != nil; e = m.order.Front() {
		old := e.Value.(timedEntry[K, V])
		if m.order.Len() <= m.most && old.at.After(cutoff) {
			return
		}
		m.order.Remove(e)
		delete(m.byKey, old.key)
	}
}

// recall returns what is kept under k, unless it was kept longer than keep ago.
func (m *timedMemory[K, V]) recall(k K, now time.Time) (V, bool) {
	e, ok := m.byKey[k]
	if !ok {
		var zero V
		return zero, false
	}
	rec := e.Value.(timedEntry[K, V])
	if !rec.at.After(now.Add(-m.keep)) {
		var zero V
		return zero, false
	}
	return rec.val, true
}
