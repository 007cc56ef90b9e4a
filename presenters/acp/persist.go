package acp

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// persister writes transcripts off the notification path. Queuing never blocks; a
// newer version of a queued message or conversation replaces the older one in place,
// so the store sees at most one write per message per batch, in first-queued order
// (which is the order messages take in their conversation).
type persister struct {
	store *store.Store
	log   *slog.Logger

	mu      sync.Mutex
	order   []string
	jobs    map[string]*writeJob
	closed  bool
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

type writeJob struct {
	conv    *store.Conversation
	msg     *presenters.Message
	waiters []chan struct{}
}

// writeTimeout bounds one store write.
const writeTimeout = 30 * time.Second

func newPersister(store *store.Store, log *slog.Logger) *persister {
	return &persister{store: store, log: log, jobs: map[string]*writeJob{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
}

// queue adds or replaces a job; done (if not nil) closes once it was written.
func (w *persister) queue(key string, conv *store.Conversation, msg *presenters.Message, done chan struct{}) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.write(&writeJob{conv: conv, msg: msg})
		if done != nil {
			close(done)
		}
		return
	}
	j := w.jobs[key]
	if j == nil {
		j = &writeJob{}
		w.jobs[key] = j
		w.order = append(w.order, key)
	}
	j.conv, j.msg = conv, msg
	if done != nil {
		j.waiters = append(j.waiters, done)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *persister) saveMessages(msgs ...presenters.Message) {
	for i := range msgs {
		w.queue("m:"+msgs[i].ID, nil, &msgs[i], nil)
	}
}

// saveMessageWait queues msg; the channel closes once it is in the store.
func (w *persister) saveMessageWait(msg presenters.Message) <-chan struct{} {
	done := make(chan struct{})
	w.queue("m:"+msg.ID, nil, &msg, done)
	return done
}

func (w *persister) saveConversation(c store.Conversation) {
	w.queue("c:"+c.ID, &c, nil, nil)
}

func (w *persister) run() {
	defer close(w.stopped)
	for {
		select {
		case <-w.wake:
			w.flush()
		case <-w.stop:
			w.flush()
			return
		}
	}
}

func (w *persister) flush() {
	w.mu.Lock()
	order, jobs := w.order, w.jobs
	w.order, w.jobs = nil, map[string]*writeJob{}
	w.mu.Unlock()
	for _, key := range order {
		j := jobs[key]
		w.write(j)
		for _, done := range j.waiters {
			close(done)
		}
	}
}

func (w *persister) write(j *writeJob) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	switch {
	case j.conv != nil:
		if err := w.store.UpdateConversation(ctx, *j.conv); err != nil {
			w.log.Error("storing session failed", "session_id", j.conv.ID, "err", err)
		}
	case j.msg != nil:
		if err := w.store.SaveMessage(ctx, *j.msg); err != nil {
			w.log.Error("storing message failed", "session_id", j.msg.SessionID, "message_id", j.msg.ID, "err", err)
		}
	}
}

// close writes what is queued and stops; later writes happen at once, in the caller.
func (w *persister) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.stopped
}
