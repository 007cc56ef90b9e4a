// Package webhooks tells people who are not watching what their sessions need: it POSTs a
// signed notice to configured URLs when a permission or an elicitation waits, a turn
// ends, an error happens or a session closes. It is an observer of the event hub, like
// metrics: Published only queues, and one goroutine (Run) delivers, retries with backoff
// and records every outcome through a Recorder (the service's audit log). A notice holds
// ids, the event type and times, never content: the receiver reads the rest through the
// API. docs/webhooks.md is the receiver's side: payload, headers, how to verify.
package webhooks

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// Kind is what a notice tells of; its string is the payload's type and the config's
// name for it.
type Kind string

const (
	PermissionRequired  Kind = "permission_required"
	ElicitationRequired Kind = "elicitation_required"
	TurnEnded           Kind = "turn_ended"
	Error               Kind = "error"
	SessionClosed       Kind = "session_closed"
)

// Kinds are all the kinds, in the order the docs list them.
var Kinds = []Kind{PermissionRequired, ElicitationRequired, TurnEnded, Error, SessionClosed}

// Errors of a hook's settings; each comes wrapped with what was wrong.
var (
	ErrUnknownKind = errors.New("unknown webhook event")
	ErrBadURL      = errors.New("bad webhook URL")
	ErrWeakSecret  = errors.New("webhook secret too short")
	// ErrSessionHooksOff: the server takes no sessions' own hooks (no allowed URLs).
	ErrSessionHooksOff = errors.New("this server takes no session webhooks")
	// ErrURLNotAllowed: a session's hook URL starts with none of the allowed prefixes.
	ErrURLNotAllowed = errors.New("webhook URL not allowed")
)

// MinSecretBytes is the shortest secret a hook may be signed with.
const MinSecretBytes = 16

// SessionHookName names sessions' own hooks in the audit log.
const SessionHookName = "session"

// ParseKind returns the kind a config or the API names.
func ParseKind(s string) (Kind, error) {
	if k := Kind(s); slices.Contains(Kinds, k) {
		return k, nil
	}
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return "", fmt.Errorf("%w %q: use one of %s", ErrUnknownKind, s, strings.Join(names, ", "))
}

// CheckURL accepts an absolute http or https URL with a host.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w %q: %w", ErrBadURL, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w %q: give an absolute http:// or https:// URL", ErrBadURL, raw)
	}
	return nil
}

// Hook is one of the server's webhooks: every session's events of its kinds go to it.
type Hook struct {
	// Name tells the hook's deliveries apart in the audit log and in logs.
	Name string
	URL  string
	// Secret signs the deliveries (at least MinSecretBytes).
	Secret []byte
	// Kinds are the events it is told of; empty for all.
	Kinds []Kind
}

// SessionHook is one session's own webhook (CreateSession), signed with the server's
// session secret (Options.SessionSecret).
type SessionHook struct {
	URL   string
	Kinds []Kind // empty for all
}

// Outcome is what became of a delivery attempt.
type Outcome int

const (
	// Delivered: the receiver answered 2xx.
	Delivered Outcome = iota + 1
	// Failed: an attempt failed and another follows.
	Failed
	// GaveUp: the last attempt failed, or the server stopped first.
	GaveUp
	// Dropped: the queue was full; Record.Dropped deliveries were never attempted.
	Dropped
)

// Record is one delivery attempt or end, as the audit log keeps it.
type Record struct {
	Time       time.Time
	DeliveryID string
	Hook, Host string
	Kind       Kind
	SessionID  string
	AgentID    string
	// Sequence is the event's; 0 for Dropped.
	Sequence   uint64
	Outcome    Outcome
	Attempt    int
	HTTPStatus int
	Err        string
	Dropped    int64
}

// Options configure a Notifier; zero durations and sizes take the defaults below.
type Options struct {
	Hooks []Hook
	// SessionURLs are the prefixes a session's own hook URL must start with; none: the
	// server takes no session hooks (a hook is a request the server makes for whoever
	// creates a session, so the operator says where such requests may go).
	SessionURLs []string
	// SessionSecret signs sessions' own hooks (required with SessionURLs).
	SessionSecret []byte
	// Recorder keeps every Record (the audit log); nil keeps none.
	Recorder Recorder
	// Client makes the requests; nil: one with AttemptTimeout that follows no redirect.
	Client *http.Client
	// QueueSize bounds the deliveries waiting for the delivering goroutine; past it
	// deliveries are dropped, logged and recorded.
	QueueSize int
	// MaxAttempts and MaxElapsed bound the retries of one delivery: it is given up after
	// MaxAttempts attempts, or when the next one would start later than MaxElapsed after
	// the first.
	MaxAttempts int
	MaxElapsed  time.Duration
	// FirstRetry is the wait before the second attempt; each further wait doubles, up to
	// MaxRetryDelay, with jitter.
	FirstRetry    time.Duration
	MaxRetryDelay time.Duration
	// AttemptTimeout bounds one request.
	AttemptTimeout time.Duration
	Logger         *slog.Logger
}

// Defaults of Options.
const (
	DefaultQueueSize      = 1024
	DefaultMaxAttempts    = 8
	DefaultMaxElapsed     = 15 * time.Minute
	DefaultFirstRetry     = 2 * time.Second
	DefaultMaxRetryDelay  = 5 * time.Minute
	DefaultAttemptTimeout = 10 * time.Second
)

// maxPending bounds the deliveries waiting for a retry: while that many wait, new ones
// stay in the queue (which then overflows, recorded) rather than growing memory.
const maxPending = 1024

// target is where a delivery goes.
type target struct {
	name, url, host string
	secret          []byte
	kinds           []Kind
}

func (t *target) wants(k Kind) bool { return len(t.kinds) == 0 || slices.Contains(t.kinds, k) }

func newTarget(name, raw string, secret []byte, kinds []Kind) (*target, error) {
	if err := CheckURL(raw); err != nil {
		return nil, err
	}
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("%w: %d bytes, use at least %d", ErrWeakSecret, len(secret), MinSecretBytes)
	}
	for _, k := range kinds {
		if _, err := ParseKind(string(k)); err != nil {
			return nil, err
		}
	}
	u, _ := url.Parse(raw) // CheckURL parsed it
	return &target{name: name, url: raw, host: u.Host, secret: secret, kinds: slices.Clone(kinds)}, nil
}

// Notifier queues the notices of the events it observes and delivers them (Run).
type Notifier struct {
	hooks       []*target
	sessionURLs []string
	secret      []byte
	recorder    Recorder
	client      *http.Client
	logger      *slog.Logger

	maxAttempts                     int
	maxElapsed, firstRetry, maxWait time.Duration
	attemptTimeout                  time.Duration

	queue chan *delivery
	// overflowed counts the deliveries dropped since Run last recorded them.
	overflowed atomic.Int64

	mu       sync.Mutex
	sessions map[string]*target // sessions' own hooks, until they close
}

// New checks the hooks and returns a Notifier; Run delivers what it queues.
func New(opts Options) (*Notifier, error) {
	n := &Notifier{sessionURLs: opts.SessionURLs, secret: opts.SessionSecret, recorder: opts.Recorder, client: opts.Client,
		logger: opts.Logger, maxAttempts: opts.MaxAttempts, maxElapsed: opts.MaxElapsed, firstRetry: opts.FirstRetry,
		maxWait: opts.MaxRetryDelay, attemptTimeout: opts.AttemptTimeout, sessions: make(map[string]*target)}
	for i, h := range opts.Hooks {
		name := h.Name
		if name == "" {
			name = fmt.Sprintf("webhooks[%d]", i)
		}
		t, err := newTarget(name, h.URL, h.Secret, h.Kinds)
		if err != nil {
			return nil, fmt.Errorf("webhook %s: %w", name, err)
		}
		n.hooks = append(n.hooks, t)
	}
	if len(opts.SessionURLs) > 0 && len(opts.SessionSecret) < MinSecretBytes {
		return nil, fmt.Errorf("session webhooks: %w: %d bytes, use at least %d", ErrWeakSecret, len(opts.SessionSecret), MinSecretBytes)
	}
	for _, p := range opts.SessionURLs {
		if err := CheckURL(p); err != nil {
			return nil, fmt.Errorf("session webhooks: allowed URL: %w", err)
		}
	}
	if n.logger == nil {
		n.logger = slog.Default()
	}
	if n.maxAttempts <= 0 {
		n.maxAttempts = DefaultMaxAttempts
	}
	if n.maxElapsed <= 0 {
		n.maxElapsed = DefaultMaxElapsed
	}
	if n.firstRetry <= 0 {
		n.firstRetry = DefaultFirstRetry
	}
	if n.maxWait <= 0 {
		n.maxWait = DefaultMaxRetryDelay
	}
	if n.attemptTimeout <= 0 {
		n.attemptTimeout = DefaultAttemptTimeout
	}
	if n.client == nil {
		n.client = &http.Client{Timeout: n.attemptTimeout,
			// A redirect is not followed: the operator chose where notices go.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	size := opts.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	n.queue = make(chan *delivery, size)
	return n, nil
}

// CheckSessionHook says whether the server takes this session hook.
func (n *Notifier) CheckSessionHook(h SessionHook) error {
	if len(n.sessionURLs) == 0 {
		return fmt.Errorf("%w: an operator lists where they may go in session_webhooks.allowed_urls", ErrSessionHooksOff)
	}
	if err := CheckURL(h.URL); err != nil {
		return err
	}
	if !slices.ContainsFunc(n.sessionURLs, func(p string) bool { return allowedBy(h.URL, p) }) {
		return fmt.Errorf("%w: %q starts with none of the server's session_webhooks.allowed_urls", ErrURLNotAllowed, h.URL)
	}
	for _, k := range h.Kinds {
		if _, err := ParseKind(string(k)); err != nil {
			return err
		}
	}
	return nil
}

// allowedBy reports whether a URL is under an allowed prefix: the same scheme and host
// (compared parsed, so that "https://allowed.example@elsewhere/" or
// "https://allowed.example.elsewhere/" do not pass for "https://allowed.example") and a
// path that starts with the prefix's.
func allowedBy(raw, prefix string) bool {
	u, err := url.Parse(raw)
	p, perr := url.Parse(prefix)
	if err != nil || perr != nil || u.User != nil {
		return false
	}
	return u.Scheme == p.Scheme && u.Host == p.Host && strings.HasPrefix(u.Path, p.Path) && (p.RawQuery == "" || u.RawQuery == p.RawQuery)
}

// WatchSession sends the session's events of the hook's kinds to its own hook too,
// until the session closes. The hook must have passed CheckSessionHook.
func (n *Notifier) WatchSession(sessionID string, h SessionHook) error {
	if err := n.CheckSessionHook(h); err != nil {
		return err
	}
	t, err := newTarget(SessionHookName, h.URL, n.secret, h.Kinds)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sessions[sessionID] = t
	return nil
}

// kindOf is the notice an event makes, if any.
func kindOf(ev presenters.Event) (kind Kind, messageID, requestID string, ok bool) {
	switch p := ev.Payload.(type) {
	case presenters.PermissionRequiredPayload:
		return PermissionRequired, p.Request.MessageID, p.Request.RequestID, true
	case presenters.ElicitationRequiredPayload:
		return ElicitationRequired, p.Request.MessageID, p.Request.ElicitationID, true
	case presenters.MessageEndPayload:
		// The end of an assistant message ends the turn; a user's or the system's
		// message (shown again by a replay or a queue) does not.
		if p.Role == presenters.RoleUser || p.Role == presenters.RoleSystem {
			return "", "", "", false
		}
		return TurnEnded, p.MessageID, "", true
	case presenters.ErrorPayload:
		return Error, p.MessageID, "", true
	case presenters.SessionClosedPayload:
		return SessionClosed, "", "", true
	}
	return "", "", "", false
}

// Published queues the notices of an event (service.EventObserver). The hub calls it
// under its lock: it never waits, and a full queue drops the delivery, which is logged
// once per overflow and recorded by Run.
func (n *Notifier) Published(ev presenters.Event) {
	if ev.Replay {
		// History a LoadSession shows again was told when it happened.
		return
	}
	kind, messageID, requestID, ok := kindOf(ev)
	if !ok {
		return
	}
	n.mu.Lock()
	own := n.sessions[ev.SessionID]
	if kind == SessionClosed {
		delete(n.sessions, ev.SessionID)
	}
	n.mu.Unlock()
	for _, t := range n.hooks {
		n.enqueue(t, kind, ev, messageID, requestID)
	}
	if own != nil {
		n.enqueue(own, kind, ev, messageID, requestID)
	}
}

func (n *Notifier) enqueue(t *target, kind Kind, ev presenters.Event, messageID, requestID string) {
	if !t.wants(kind) {
		return
	}
	d := &delivery{id: newDeliveryID(), target: t, notice: notice{Type: kind, Time: ev.Time.UTC(), SessionID: ev.SessionID,
		AgentID: ev.AgentID, Sequence: ev.Sequence, MessageID: messageID, RequestID: requestID}}
	d.notice.ID = d.id
	select {
	case n.queue <- d:
	default:
		if n.overflowed.Add(1) == 1 {
			n.logger.Warn("the webhook queue is full: deliveries are dropped until it drains", "session_id", ev.SessionID,
				"agent_id", ev.AgentID, "hook", t.name, "event", kind)
		}
	}
}

// newDeliveryID is a random id, the same for every attempt of one delivery.
func newDeliveryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on a supported OS
	return hex.EncodeToString(b[:])
}
