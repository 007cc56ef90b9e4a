// Package transcript writes what presenters keep of their sessions, conversations and
// messages, to the store off their event paths, and keeps trying through a database
// outage: a presenter queues a write and goes on, and waits only for a turn's final
// state, which must be stored before the turn's end is announced. The ACP and DeepChat
// presenters share it.
package transcript

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// Store is what the writer writes to; *store.Store is one.
type Store interface {
	UpdateConversation(ctx context.Context, c store.Conversation) error
	UpdateMessages(ctx context.Context, updates ...store.MessageUpdate) error
	MessageStamp(ctx context.Context, messageID string) (int64, error)
}

var _ Store = (*store.Store)(nil)

// Writer writes transcripts off the notification path. Queuing never blocks; a newer
// version of a queued conversation, or a whole message, replaces the older one in place,
// while a message update that appends text joins the ones queued before it, so the store
// sees at most one write per message per batch, in first-queued order (which is the
// order messages take in their conversation). A write that fails but may succeed later
// (the database is away) is queued again, ahead of what came since for the same message,
// and tried again on its own after a pause, until it lands: updates that append text are
// the only copy of that text outside the event log, and a turn's final state must be
// stored before its end is announced (its waiters are told only then). Each message
// write is stamped (store.MessageUpdate.Stamp); before a failed one is sent again the
// stamp is read back, so that a write that committed though its answer was lost is not
// appended twice. A write the store refuses, or fences out because another replica took
// the session over, is dropped.
//
// Run owns the goroutine that writes; Close ends it.
type Writer struct {
	store Store
	log   *slog.Logger

	mu    sync.Mutex
	order []string
	jobs  map[string]*writeJob
	// closing is set by Close; closed once Run wrote the last of the queue and returned:
	// from then on writes happen in their callers.
	closing, closed bool
	wake            chan struct{}
	stop            chan struct{}
	stopped         chan struct{}
}

type writeJob struct {
	conv    *store.Conversation
	msgs    []store.MessageUpdate // of one message, in order
	waiters []chan<- error
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

// New returns a writer to st; Run starts it.
func New(st Store, log *slog.Logger) *Writer {
	return &Writer{store: st, log: log, jobs: map[string]*writeJob{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
}

// queue adds or replaces a job; done (if not nil) gets the outcome of its write.
func (w *Writer) queue(key string, conv *store.Conversation, msg *store.MessageUpdate, done chan<- error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		j := &writeJob{conv: conv}
		if msg != nil {
			j.msgs = []store.MessageUpdate{*msg}
		}
		err := w.write(j) // logged; nothing is left to retry it
		if done != nil {
			done <- err
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

// SaveMessages queues whole messages.
func (w *Writer) SaveMessages(msgs ...presenters.Message) {
	for _, m := range msgs {
		w.queue("m:"+m.ID, nil, &store.MessageUpdate{Message: m}, nil)
	}
}

// SaveUpdate queues an update of a message (a whole message when it appends nothing).
func (w *Writer) SaveUpdate(u store.MessageUpdate) {
	w.queue("m:"+u.ID, nil, &u, nil)
}

// SaveUpdateWait queues u; the channel gets nil once it was written, or the error for
// which it was given up: the store refused it, another replica took the session over
// (store.ErrFenced), or the writer closed while it failed.
func (w *Writer) SaveUpdateWait(u store.MessageUpdate) <-chan error {
	done := make(chan error, 1)
	w.queue("m:"+u.ID, nil, &u, done)
	return done
}

// SaveConversation queues a conversation's row.
func (w *Writer) SaveConversation(c store.Conversation) {
	w.queue("c:"+c.ID, &c, nil, nil)
}

// Pauses before writes that failed are tried again: the first, doubling up to the last.
const (
	retryFirst = 100 * time.Millisecond
	retryLast  = 2 * time.Second
)

// Run writes what is queued until Close.
func (w *Writer) Run() {
	defer close(w.stopped)
	delay := retryFirst
	var retry <-chan time.Time // set while failed writes wait
	for {
		select {
		case <-w.wake:
		case <-retry:
		case <-w.stop:
			w.drain()
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
func (w *Writer) flush(stopping bool) (failed bool) {
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
			done <- err
		}
	}
	return failed
}

// drain writes what is queued, once, until nothing is, and then lets the callers write.
func (w *Writer) drain() {
	for {
		w.flush(true)
		w.mu.Lock()
		if len(w.order) == 0 {
			w.closed = true
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}

// requeue puts a job whose write failed back ahead of what was queued since for the same
// conversation or message: a newer whole version replaces it, updates that append text
// go after it. Its waiters wait on.
func (w *Writer) requeue(key string, failed *writeJob) {
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
func (w *Writer) write(j *writeJob) error {
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
func (w *Writer) logFailure(msg string, err error, attrs ...any) {
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

// Close writes what is queued and stops Run, giving up writes that fail; later writes
// happen at once, in the caller, tried once.
func (w *Writer) Close() {
	w.mu.Lock()
	closing := w.closing
	w.closing = true
	w.mu.Unlock()
	if !closing {
		close(w.stop)
	}
	<-w.stopped
}
