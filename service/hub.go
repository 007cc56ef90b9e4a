package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/agenticd/agenticd/events"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
	"github.com/agenticd/agenticd/store"
)

// HubOptions tunes a Hub; zero values take the events package's defaults.
type HubOptions struct {
	// Capacity is how many recent events are held for resuming subscribers.
	Capacity int
	// MaxBytes bounds the held events by their estimated memory too (events.Options).
	MaxBytes int64
	// SubscriberQueue is how many events may wait for one subscriber before it is ended
	// with RESOURCE_EXHAUSTED.
	SubscriberQueue int
	// Store persists the sequence floor; nil starts at 1 every time (tests only).
	Store events.SequenceStore
	// SequenceBlock is how far ahead the floor is reserved (one store write per block).
	SequenceBlock uint64
	// Log, when set, keeps every event durably, so that Subscribe resumes from points
	// older than the ring and from before a restart (events.Options.Log); LogRetention
	// bounds it.
	Log          EventLogStore
	LogRetention events.LogRetention
	// AuditRetention bounds the audit log, which the event log's writes make (audit.go).
	AuditRetention AuditRetention
	// HeartbeatInterval is how long a Subscribe stream stays silent before it sends a
	// heartbeat (DefaultHeartbeatInterval when 0).
	HeartbeatInterval time.Duration
	// Observers see every event as it is published, under the hub's lock and in sequence
	// order (metrics, the audit record): each must be quick and must not call the hub.
	Observers []EventObserver
	// Queue, when set, keeps the messages sent while their session's turn runs (Queue,
	// queue.go); without it such a SendMessage is SESSION_BUSY.
	Queue QueueStore
	// Replica, when set, names this hub's replica among several on one database (Store
	// and Log set), as its leases do: sequences come in blocks no other replica gets, and Subscribe reads
	// every session's events from the log, whichever replica wrote them, woken by
	// WakeTails.
	Replica string
	Logger  *slog.Logger
}

// EventObserver follows the events the hub publishes.
type EventObserver interface {
	Published(ev presenters.Event)
}

// observers tells the projection, then the queue, then each further observer, of every
// event.
type observers struct {
	proj   *projection
	queue  *Queue // nil without HubOptions.Queue
	others []EventObserver
}

func (o observers) Published(ev presenters.Event) {
	o.proj.Published(ev)
	if o.queue != nil {
		o.queue.Published(ev)
	}
	for _, other := range o.others {
		other.Published(ev)
	}
}

func (o observers) Evicted(sessionID string, sequence uint64) { o.proj.Evicted(sessionID, sequence) }

// EventLogStore is the durable event log and the audit log made with it; *store.Store
// is one.
type EventLogStore interface {
	AppendFenced(ctx context.Context, batch []store.LoggedEvent, audit []store.AuditEntry, replica string) ([]string, error)
	PruneAudit(ctx context.Context, maxEntries int64, maxAge time.Duration) (int64, error)
	ReadEvents(ctx context.Context, after, until uint64, f store.EventFilter, limit int) ([]store.LoggedEvent, error)
	EventLogRange(ctx context.Context) (oldest, newest uint64, err error)
	PruneEvents(ctx context.Context, maxEvents int64, maxBytes int64, maxAge time.Duration) (int64, error)
	SessionHeads(ctx context.Context, f store.EventFilter) (map[string]uint64, error)
	ReadSessionEvents(ctx context.Context, after map[string]uint64, f store.EventFilter, limit int) ([]store.LoggedEvent, error)
}

// eventLog adapts an EventLogStore to the hub's types, and appends the audit entries of
// each batch with it.
type eventLog struct {
	st             EventLogStore
	audit          *auditor
	auditRetention AuditRetention
	logger         *slog.Logger

	// agentEvents, for a replica, is the session column of its agent events (which have
	// no session) in the log: each replica's agent events follow each other in sequence
	// order, not those of another replica, so a log tail follows them apart, as it does
	// sessions. Empty: the column stays empty.
	agentEvents string
	// replica, for a replica, is its name in the lease table: its events of a session
	// another replica holds are left out of the log (store.AppendFenced), with one
	// warning per session (fencedWarned; only the log writer appends).
	replica      string
	fencedWarned map[string]bool

	// The audit entries of the batch last tried, by its first sequence: the hub's log
	// writer tries a failed batch again as it was, and making the entries takes what the
	// auditor held for them (a tool's start, the client that answered). Only the log
	// writer calls AppendEvents.
	triedFrom    uint64
	triedEntries []store.AuditEntry
}

func (l *eventLog) AppendEvents(ctx context.Context, batch []events.LoggedEvent) error {
	if len(batch) == 0 {
		return nil
	}
	rows := make([]store.LoggedEvent, len(batch))
	for i, ev := range batch {
		rows[i] = store.LoggedEvent{Sequence: ev.Sequence, SessionID: ev.SessionID, AgentID: ev.AgentID, Type: int(ev.Type),
			MessageID: ev.MessageID, Time: ev.Time, Data: ev.Data}
		if ev.SessionID == "" {
			rows[i].SessionID = l.agentEvents
		}
	}
	if l.triedFrom != batch[0].Sequence || l.triedEntries == nil {
		l.triedFrom, l.triedEntries = batch[0].Sequence, l.audit.entries(batch, l.logger)
	}
	fenced, err := l.st.AppendFenced(ctx, rows, l.triedEntries, l.replica)
	if err == nil {
		l.triedEntries = nil
	}
	for _, id := range fenced {
		if l.fencedWarned[id] {
			continue
		}
		if l.fencedWarned == nil {
			l.fencedWarned = map[string]bool{}
		}
		l.fencedWarned[id] = true
		l.logger.Warn("this replica's events of a session another replica took over are left out of the event log", "session_id", id)
	}
	return err
}

var _ events.TailLog = (*eventLog)(nil)

func (l *eventLog) ReadEvents(ctx context.Context, after, until uint64, f events.Filter, limit int) ([]events.LoggedEvent, error) {
	return loggedEvents(l.st.ReadEvents(ctx, after, until, storeFilter(f), limit))
}

func (l *eventLog) SessionHeads(ctx context.Context, f events.Filter) (map[string]uint64, error) {
	return l.st.SessionHeads(ctx, storeFilter(f))
}

func (l *eventLog) ReadSessionEvents(ctx context.Context, after map[string]uint64, f events.Filter, limit int) ([]events.LoggedEvent, error) {
	return loggedEvents(l.st.ReadSessionEvents(ctx, after, storeFilter(f), limit))
}

// storeFilter is the hub's filter as the store takes it.
func storeFilter(f events.Filter) store.EventFilter {
	filter := store.EventFilter{SessionIDs: f.SessionIDs, AgentIDs: f.AgentIDs}
	for _, t := range f.Types {
		filter.Types = append(filter.Types, int(t))
	}
	return filter
}

// loggedEvents are the store's rows as the hub takes them.
func loggedEvents(rows []store.LoggedEvent, err error) ([]events.LoggedEvent, error) {
	if err != nil {
		return nil, err
	}
	out := make([]events.LoggedEvent, len(rows))
	for i, r := range rows {
		out[i] = events.LoggedEvent{Sequence: r.Sequence, SessionID: r.SessionID, AgentID: r.AgentID, Type: presenters.EventType(r.Type),
			MessageID: r.MessageID, Time: r.Time, Data: r.Data}
	}
	return out, nil
}

func (l *eventLog) EventLogRange(ctx context.Context) (oldest, newest uint64, err error) {
	return l.st.EventLogRange(ctx)
}

// PruneEvents applies the event log's retention, and the audit log's with it.
func (l *eventLog) PruneEvents(ctx context.Context, r events.LogRetention) (int64, error) {
	if _, err := l.st.PruneAudit(ctx, l.auditRetention.MaxEntries, l.auditRetention.MaxAge); err != nil {
		l.logger.Error("could not apply the audit log's retention", "err", err)
	}
	return l.st.PruneEvents(ctx, r.MaxEvents, r.MaxBytes, r.MaxAge)
}

// DefaultHeartbeatInterval keeps an idle stream well inside the idle timeouts of common
// proxies and load balancers (60 s and up).
const DefaultHeartbeatInterval = 15 * time.Second

// agentEventsPrefix starts the session column of a replica's agent events in the log
// (eventLog.agentEvents); session ids never start with it.
const agentEventsPrefix = "@replica:"

// Hub is the service's event hub and the presenters' Publisher: an events.Hub whose
// events are encoded once to wire bytes shared by every stream, and the projection of
// each session's events that GetSession, ListSessions and RespondPermission read.
type Hub struct {
	events     *events.Hub[*wire.Event]
	proj       *projection
	heartbeat  time.Duration
	replicated bool // subscriptions follow the log (HubOptions.Replica)
	// audit makes the audit log's entries; nil without an event log.
	audit *auditor
	// queue holds the messages waiting for their session's turn; nil without
	// HubOptions.Queue.
	queue *Queue
	// cutOff is set while this replica cannot reach its database (replicas.Replica.Run): its
	// streams cannot vouch that they miss nothing.
	cutOff atomic.Bool
}

// cutOffError ends a stream that cannot vouch for what it sends: its replica cannot
// reach its database, or a read of the log did not answer. The client resumes after Last.
type cutOffError struct {
	Last uint64
	err  error
}

func (e *cutOffError) Error() string {
	return fmt.Sprintf("this replica cannot reach its database, so this stream may miss events (%v): resume on another replica, or here later, with after_sequence=%d", e.err, e.Last)
}

func (e *cutOffError) Unwrap() error { return e.err }

var _ presenters.Publisher = (*Hub)(nil)

// NewHub loads the sequence floor and reserves the first block above it.
func NewHub(ctx context.Context, opts HubOptions) (*Hub, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	proj := newProjection()
	h := &Hub{proj: proj}
	if opts.Queue != nil {
		h.queue = newQueue(opts.Queue, h, logger)
	}
	var (
		log   events.EventLog
		audit *auditor
	)
	if opts.Log != nil {
		audit = newAuditor()
		el := &eventLog{st: opts.Log, audit: audit, auditRetention: opts.AuditRetention, logger: logger}
		if opts.Replica != "" {
			el.agentEvents, el.replica = agentEventsPrefix+opts.Replica, opts.Replica
		}
		log = el
	}
	hub, err := events.New(ctx, events.Options[*wire.Event]{
		Capacity:        opts.Capacity,
		MaxBytes:        opts.MaxBytes,
		SubscriberQueue: opts.SubscriberQueue,
		Store:           opts.Store,
		SequenceBlock:   opts.SequenceBlock,
		ExclusiveBlocks: opts.Replica != "",
		Encode:          func(ev presenters.Event) *wire.Event { return wire.Encode(ev, logger) },
		Size:            func(ev *wire.Event) int { return len(ev.Bytes()) },
		Observer:        observers{proj: proj, queue: h.queue, others: opts.Observers},
		Log:             log,
		// The log keeps an event's wire bytes as they are.
		Marshal:      func(ev *wire.Event) []byte { return ev.Bytes() },
		Unmarshal:    wire.NewEvent,
		LogRetention: opts.LogRetention,
		Logger:       logger,
	})
	if err != nil {
		return nil, err
	}
	heartbeat := opts.HeartbeatInterval
	if heartbeat <= 0 {
		heartbeat = DefaultHeartbeatInterval
	}
	h.events, h.heartbeat, h.audit, h.replicated = hub, heartbeat, audit, opts.Replica != ""
	return h, nil
}

// Queue is the hub's queue of messages (HubOptions.Queue), nil without one. Run it once
// the Service exists (New gives it the registry).
func (h *Hub) Queue() *Queue { return h.queue }

// WaitLogged waits until every event published before the call is in the event log, and
// reports whether they are (false when ctx ended first).
func (h *Hub) WaitLogged(ctx context.Context) bool { return h.events.WaitLogged(ctx) }

// SkipAhead moves the sequences on to a fresh block: every event published after it
// returns is above every sequence any replica issued before (events.Hub.SkipAhead).
func (h *Hub) SkipAhead(ctx context.Context) error { return h.events.SkipAhead(ctx) }

// SetCutOff says whether this replica is cut off from its database: while it is, its
// quiet streams end (DATABASE_UNAVAILABLE) and the queue's store calls fail at once.
func (h *Hub) SetCutOff(cut bool) { h.cutOff.Store(cut) }

// WakeTails tells the subscriptions that follow the log that these sessions (all, when
// all is set) have new events in it.
func (h *Hub) WakeTails(sessionIDs []string, all bool) { h.events.WakeTails(sessionIDs, all) }

// Publish numbers the event and hands it to the projection and the subscribers
// (events.Hub.Publish), with the principal of the call it answers (auditor.stamp).
func (h *Hub) Publish(ev presenters.Event) uint64 {
	if h.audit != nil {
		ev.Payload = h.audit.stamp(ev.SessionID, ev.Payload)
	}
	return h.events.Publish(ev)
}

// noteCall notes the caller of ctx under key (auditor.note) until done is called, so
// that the events the call causes name it; a no-op without an event log.
func (h *Hub) noteCall(ctx context.Context, key string) (done func()) {
	if h.audit == nil || !h.audit.note(ctx, key) {
		return func() {}
	}
	return func() { h.audit.forget(key) }
}

// LastSequence is the sequence of the newest event issued (the base when none yet).
func (h *Hub) LastSequence() uint64 { return h.events.LastSequence() }

// HeldRange is the oldest sequence held, in the ring or the event log, and the newest
// issued: Subscribe resumes after any point from oldest-1 to newest. After a restart the
// log's oldest starts it; oldest is newest+1 when none is held (no log, or an empty one),
// and both are 0 before the first event.
func (h *Hub) HeldRange() (oldest, newest uint64) { return h.events.HeldRange() }

// HeartbeatInterval is how long a Subscribe stream stays silent before a heartbeat.
func (h *Hub) HeartbeatInterval() time.Duration { return h.heartbeat }

// SubscriberQueue is how many events may wait for one subscriber before its stream ends.
func (h *Hub) SubscriberQueue() int { return h.events.SubscriberQueue() }

// Close ends every subscription (their streams report that the server is shutting down),
// refuses new ones and appends what waits to the event log; publishing still works (each
// event then goes to the log at once).
func (h *Hub) Close() { h.events.Close() }

// TrimHeld lets the oldest held events go down to maxBytes, for an idle server; resumes
// from before the rest read the event log (events.Hub.TrimHeld).
func (h *Hub) TrimHeld(maxBytes int64) int { return h.events.TrimHeld(maxBytes) }

// eventSource is a subscription as Subscribe reads it: one that the hub feeds
// (*events.Subscription), or one that follows the event log (*events.Tail).
type eventSource interface {
	NextBatch(ctx context.Context, idle <-chan time.Time, maxEvents, maxBytes int, dst []*wire.Event) (events.Batch[*wire.Event], error)
	CaughtUp() (uint64, bool)
	Last() uint64
	Settled() uint64
	Close()
}

var (
	_ eventSource = (*events.Subscription[*wire.Event])(nil)
	_ eventSource = (*events.Tail[*wire.Event])(nil)
)

// subscribe registers a subscriber (events.Hub.Subscribe, or events.Hub.Tail for a
// replica), with errors that tell a client what to do.
func (h *Hub) subscribe(f events.Filter, start events.Start) (eventSource, error) {
	var (
		sub eventSource
		err error
	)
	if h.replicated {
		sub, err = h.events.Tail(f, start)
	} else {
		sub, err = h.events.Subscribe(f, start)
	}
	var outOfRange *events.OutOfRangeError
	switch {
	case err == nil:
		return sub, nil
	case errors.Is(err, events.ErrClosed):
		return nil, fmt.Errorf("%w: reconnect when it is back", errShuttingDown)
	case errors.As(err, &outOfRange) && outOfRange.After > outOfRange.Newest:
		return nil, fmt.Errorf("after_sequence: %w; resume from a sequence you received, or leave start unset for live events", err)
	case errors.As(err, &outOfRange):
		return nil, fmt.Errorf("after_sequence: %w; %s", err, rebuildHint)
	}
	return nil, err
}

// rebuildHint is what a client whose resume point is no longer held does instead.
const rebuildHint = "rebuild from GetSession and ListMessages, then subscribe with after_sequence set to the session's last_sequence"

// sessionSnapshot is what the hub knows of one session at one point of the stream.
type sessionSnapshot struct {
	// AgentID is empty when the session has no held events.
	AgentID string
	// Point is the newest sequence issued when the snapshot was taken. Every event of the
	// session up to it has happened, so resuming a subscription there misses nothing and
	// repeats nothing; and, being the newest, it stays resumable until a whole ring of
	// newer events has passed (a session's own last event may be about to leave the ring).
	Point    uint64
	InFlight string
	// InFlightFirst is the sequence of InFlight's first event (0 when none is in flight).
	InFlightFirst uint64
	Pending       []presenters.PermissionRequest
	Elicitations  []presenters.ElicitationRequest
}

// snapshot returns the session's projection and the point it was taken at.
func (h *Hub) snapshot(sessionID string) sessionSnapshot {
	var snap sessionSnapshot
	h.events.View(func(newest uint64) { snap = h.proj.snapshot(sessionID, newest) })
	return snap
}

// snapshots is snapshot for many sessions, at one point.
func (h *Hub) snapshots(sessionIDs []string) []sessionSnapshot {
	out := make([]sessionSnapshot, len(sessionIDs))
	h.events.View(func(newest uint64) {
		for i, id := range sessionIDs {
			out[i] = h.proj.snapshot(id, newest)
		}
	})
	return out
}

// agentOf returns the agent of a session with held events ("" if it has none).
func (h *Hub) agentOf(sessionID string) string {
	var agentID string
	h.events.View(func(uint64) {
		if st := h.proj.sessions[sessionID]; st != nil {
			agentID = st.agentID
		}
	})
	return agentID
}

// pendingRequest returns a pending permission request of a session.
func (h *Hub) pendingRequest(sessionID, requestID string) (req presenters.PermissionRequest, ok bool) {
	h.events.View(func(uint64) {
		if st := h.proj.sessions[sessionID]; st != nil {
			for _, r := range st.pending {
				if r.RequestID == requestID {
					req, ok = r, true
					return
				}
			}
		}
	})
	return req, ok
}
