package acp

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// persister writes transcripts off the notification path. Queuing never blocks; a
// newer version of a queued conversation, or a whole message, replaces the older one in
// place, while a message update that appends text (messageBuilder.update) joins the ones
// queued before it, so the store sees at most one write per message per batch, in
// first-queued order (which is the order messages take in their conversation). Updates
// that append text are the only copy of that text outside the event log, so a write of
// them that fails is queued again, ahead of what came since, and tried with the next.
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
	msgs    []store.MessageUpdate // of one message, in order
	waiters []chan struct{}
}

// appends reports whether the job holds an update that appends text.
func (j *writeJob) appends() bool {
	for _, u := range j.msgs {
		if len(u.Appended) > 0 {
			return true
		}
	}
	return false
}

// writeTimeout bounds one store write.
const writeTimeout = 30 * time.Second

// checkpointBytes is how much new text of a running turn makes it checkpoint before
// checkpointEvery is up: in a flood the text not stored yet is all the builder holds of
// the reply, so this bounds its memory (a flood of 25 MB/s would otherwise hold 50 MB
// between two timed checkpoints). Each checkpoint is one write transaction.
const checkpointBytes = 1 << 20

func newPersister(store *store.Store, log *slog.Logger) *persister {
	return &persister{store: store, log: log, jobs: map[string]*writeJob{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
}

// queue adds or replaces a job; done (if not nil) closes once it was written.
func (w *persister) queue(key string, conv *store.Conversation, msg *store.MessageUpdate, done chan struct{}) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		j := &writeJob{conv: conv}
		if msg != nil {
			j.msgs = []store.MessageUpdate{*msg}
		}
		_ = w.write(j) // logged; nothing is left to retry it
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
	j.conv = conv
	switch {
	case msg == nil:
	case len(msg.Appended) > 0:
		j.msgs = append(j.msgs, *msg)
	default:
		j.msgs = []store.MessageUpdate{*msg}
	}
	if done != nil {
		j.waiters = append(j.waiters, done)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// saveMessages queues whole messages.
func (w *persister) saveMessages(msgs ...presenters.Message) {
	for _, m := range msgs {
		w.queue("m:"+m.ID, nil, &store.MessageUpdate{Message: m}, nil)
	}
}

// saveUpdate queues an update of a message (messageBuilder.update).
func (w *persister) saveUpdate(u store.MessageUpdate) {
	w.queue("m:"+u.ID, nil, &u, nil)
}

// saveUpdateWait queues u; the channel closes once it was written (or its write failed).
func (w *persister) saveUpdateWait(u store.MessageUpdate) <-chan struct{} {
	done := make(chan struct{})
	w.queue("m:"+u.ID, nil, &u, done)
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
		if err := w.write(j); err != nil && j.appends() && retryable(err) {
			w.requeue(key, j.msgs)
		}
		for _, done := range j.waiters {
			close(done)
		}
	}
}

// requeue puts updates whose write failed back ahead of those queued since.
func (w *persister) requeue(key string, msgs []store.MessageUpdate) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.jobs[key]
	if j == nil {
		j = &writeJob{}
		w.jobs[key] = j
		w.order = append(w.order, key)
	}
	if len(j.msgs) > 0 && !j.appends() {
		return // a whole save queued since supersedes them
	}
	j.msgs = append(msgs, j.msgs...)
}

// retryable reports whether a failed write may succeed when tried again: not when the
// store refused what it was given.
func retryable(err error) bool {
	return !errors.Is(err, presenters.ErrNotFound) && !errors.Is(err, presenters.ErrInvalidArgument) &&
		!errors.Is(err, presenters.ErrMessageIDInUse)
}

// write stores the job, logging a failure.
func (w *persister) write(j *writeJob) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	switch {
	case j.conv != nil:
		if err := w.store.UpdateConversation(ctx, *j.conv); err != nil {
			w.log.Error("storing session failed", "session_id", j.conv.ID, "err", err)
			return err
		}
	case len(j.msgs) > 0:
		m := j.msgs[0]
		if err := w.store.UpdateMessages(ctx, j.msgs...); err != nil {
			w.log.Error("storing message failed", "session_id", m.SessionID, "message_id", m.ID, "err", err)
			return err
		}
	}
	return nil
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
