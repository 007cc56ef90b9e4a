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
// first-queued order (which is the order messages take in their conversation). A write
// that fails but may succeed later (the database is away) is queued again, ahead of what
// came since for the same message, and tried again on its own after a pause, until it
// lands: updates that append text are the only copy of that text outside the event log,
// and a turn's final state must be stored before its end is announced (its waiters are
// told only then). Each message write is stamped (store.MessageUpdate.Stamp); before a
// failed one is sent again the stamp is read back, so that a write that committed though
// its answer was lost is not appended twice. A write the store refuses, or fences out
// because another replica took the session over, is dropped.
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
	// unsure is the stamp of the last write of the first sent of msgs that failed: it may
	// have committed all the same (the connection lost the answer), which is read back
	// before they are sent again, so that their text is appended once.
	unsure int64
	sent   int
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

// Pauses before writes that failed are tried again: the first, doubling up to the last.
const (
	retryFirst = 100 * time.Millisecond
	retryLast  = 2 * time.Second
)

func (w *persister) run() {
	defer close(w.stopped)
	delay := retryFirst
	var retry <-chan time.Time // set while failed writes wait
	for {
		select {
		case <-w.wake:
		case <-retry:
		case <-w.stop:
			w.flush(true)
			return
		}
		if w.flush(false) {
			retry, delay = time.After(delay), min(2*delay, retryLast)
		} else {
			retry, delay = nil, retryFirst
		}
	}
}

// flush writes what is queued and reports whether writes that failed wait to be tried
// again; stopping, it gives them up instead.
func (w *persister) flush(stopping bool) (failed bool) {
	w.mu.Lock()
	order, jobs := w.order, w.jobs
	w.order, w.jobs = nil, map[string]*writeJob{}
	w.mu.Unlock()
	for _, key := range order {
		j := jobs[key]
		err := w.write(j)
		if err != nil && retryable(err) && !stopping {
			w.requeue(key, j)
			failed = true
			continue
		}
		for _, done := range j.waiters {
			close(done)
		}
	}
	return failed
}

// requeue puts a job whose write failed back ahead of what was queued since for the same
// conversation or message: a newer whole version replaces it, updates that append text
// go after it. Its waiters wait on.
func (w *persister) requeue(key string, failed *writeJob) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.jobs[key]
	if j == nil {
		w.jobs[key] = failed
		w.order = append([]string{key}, w.order...)
		return
	}
	j.waiters = append(failed.waiters, j.waiters...)
	if j.conv != nil || (len(j.msgs) > 0 && !j.appends()) {
		return // a whole save queued since supersedes it
	}
	j.msgs = append(failed.msgs, j.msgs...)
	j.unsure, j.sent = failed.unsure, failed.sent
}

// retryable reports whether a failed write may succeed when tried again: not when the
// store refused what it was given, nor when another replica took the session over.
func retryable(err error) bool {
	return !errors.Is(err, presenters.ErrNotFound) && !errors.Is(err, presenters.ErrInvalidArgument) &&
		!errors.Is(err, presenters.ErrMessageIDInUse) && !errors.Is(err, store.ErrFenced)
}

// write stores the job, logging a failure.
func (w *persister) write(j *writeJob) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	switch {
	case j.conv != nil:
		if err := w.store.UpdateConversation(ctx, *j.conv); err != nil {
			w.logFailure("storing session failed", err, "session_id", j.conv.ID)
			return err
		}
	case len(j.msgs) > 0:
		m := j.msgs[0]
		if j.unsure != 0 {
			stamp, err := w.store.MessageStamp(ctx, m.ID)
			if err != nil {
				w.logFailure("storing message failed", err, "session_id", m.SessionID, "message_id", m.ID)
				return err
			}
			if stamp == j.unsure { // the write that failed committed: not again
				j.msgs = j.msgs[j.sent:]
			}
			j.unsure, j.sent = 0, 0
			if len(j.msgs) == 0 {
				return nil
			}
		}
		stamp := time.Now().UnixNano()
		for i := range j.msgs {
			j.msgs[i].Stamp = stamp
		}
		if err := w.store.UpdateMessages(ctx, j.msgs...); err != nil {
			j.unsure, j.sent = stamp, len(j.msgs)
			w.logFailure("storing message failed", err, "session_id", m.SessionID, "message_id", m.ID)
			return err
		}
	}
	return nil
}

// logFailure logs a failed write: a warning when it is tried again or fenced out, an
// error when it is given up.
func (w *persister) logFailure(msg string, err error, attrs ...any) {
	attrs = append(attrs, "err", err)
	switch {
	case errors.Is(err, store.ErrFenced):
		w.log.Warn(msg+": another replica took the session over; this replica's write is dropped", attrs...)
	case retryable(err):
		w.log.Warn(msg+"; trying again", attrs...)
	default:
		w.log.Error(msg, attrs...)
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
