package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// DefaultLeaseTTL is how long a replica's hold on a session lasts without renewal: the
// longest a dead replica's sessions wait before another replica may take them over.
const DefaultLeaseTTL = 15 * time.Second

// forwardedHeader marks a forwarded call with the replica that forwarded it; a call is
// forwarded at most once, so two replicas that disagree on an owner cannot bounce it
// between them.
const forwardedHeader = "agenticd-forwarded"

// LeaseStore holds the session leases of the replicas sharing a database; *store.Store is
// one.
type LeaseStore interface {
	AcquireLease(ctx context.Context, sessionID, replica, address string, ttl time.Duration) (store.Lease, error)
	RenewLeases(ctx context.Context, replica string, ttl time.Duration) ([]string, error)
	ReleaseLeases(ctx context.Context, replica string, sessionIDs ...string) error
	SessionLease(ctx context.Context, sessionID string) (store.Lease, error)
	LapsedWithUnfinishedWork(ctx context.Context, limit int) ([]string, error)
}

var _ LeaseStore = (*store.Store)(nil)

// Owners finds the agent a stored session belongs to; *Registry is one.
type Owners interface {
	OwnerOf(ctx context.Context, sessionID string) (presenters.Presenter, error)
}

// ReplicaHub is what the router needs of the replica's event hub; *Hub is one.
type ReplicaHub interface {
	// SkipAhead numbers the events published after it above every sequence issued so far.
	SkipAhead(ctx context.Context) error
	// WaitLogged waits until the events published so far are in the event log.
	WaitLogged(ctx context.Context) bool
	// SetCutOff says whether this replica is cut off from the database.
	SetCutOff(cut bool)
}

// Successor is what the service does with a session taken over from a replica whose
// lease ran out; *TakeOvers is one.
type Successor interface {
	// EndPrevious ends, visibly, what the last owner left running, and returns how many
	// replies it ended.
	EndPrevious(ctx context.Context, sessionID string, logger *slog.Logger) (int, error)
	// Due starts the messages the last owner left queued.
	Due(sessionID string)
}

// Principals names the caller of a forwarded call for the owner, which trusts the name
// beside the replicas' shared token and forwardedHeader; ForwardedPrincipal is one.
type Principals interface {
	Header(ctx context.Context) (key, value string)
}

var (
	_ Owners     = (*Registry)(nil)
	_ ReplicaHub = (*Hub)(nil)
	_ Successor  = (*TakeOvers)(nil)
	_ Principals = ForwardedPrincipal{}
)

// ReplicaOptions configures Replicas.
type ReplicaOptions struct {
	// ID names this process in the lease table: unique per process (a restart under the
	// same configured id must not renew, and hold forever, the leases its dead
	// predecessor left), and the same as HubOptions.Replica. Address is where the others
	// reach it (host:port of its gRPC listener).
	ID, Address string
	// LeaseTTL is DefaultLeaseTTL when 0.
	LeaseTTL time.Duration
	// Token is the bearer token every replica accepts: forwarded calls carry it.
	Token      string
	Leases     LeaseStore
	Owners     Owners
	Hub        ReplicaHub
	Successor  Successor
	Principals Principals
	Logger     *slog.Logger
}

// Replicas is this replica's part in a group of agenticd replicas on one database. Each
// session is owned by one replica, through a lease row it renews while it lives. A
// session's call that reaches another replica is forwarded to the owner; a call for a
// session whose owner's lease ran out takes the session over here: the sequence counter
// jumps above every sequence issued so far (so the session's events keep rising), the
// reply the dead owner left running is ended as interrupted, visibly, and the session is
// loaded again before the first call that needs it live.
type Replicas struct {
	// id is this process's name in the lease table (ReplicaOptions.ID).
	id, address string
	token       string // sent on forwarded calls (ReplicaOptions.Token)
	ttl         time.Duration
	leases      LeaseStore
	owners      Owners
	hub         ReplicaHub
	successor   Successor
	principals  Principals
	logger      *slog.Logger

	mu    sync.Mutex
	owned map[string]*ownedSession
	conns map[string]*grpc.ClientConn // by owner address, for forwarding
	// lastRenewal is when the last renewal that succeeded was sent: the leases last at
	// least a ttl from then. Near its end this replica stops serving its sessions, since
	// others may take them then.
	lastRenewal time.Time
	// lapsed are the sessions dropped from owned because their lease ran out unrenewed
	// (this replica stalled): still live here, so regaining one is not a take-over.
	lapsed map[string]bool
	// sweepSkip holds the orphaned sessions a sweep could not take over, until when it
	// leaves them alone (the sweep reads the oldest lapsed leases first).
	sweepSkip map[string]time.Time
	// connectedSince is when the renewals that have all succeeded since began (the start,
	// or the first after a failed one); zero while they fail. Another replica's lapsed
	// lease is taken over only once it is a ttl old: then the owner failed every renewal
	// of a whole ttl while the database answered this replica, so the lapse is the
	// owner's, not the database's.
	connectedSince time.Time
}

// ownedSession is a session this replica holds the lease of.
type ownedSession struct {
	ready chan struct{} // closed once the take-over is done (at once for a new session)
	// What the take-over found, for the calls that waited on it (written before ready is
	// closed; the entry is gone from owned then): its failure, or the lease of the replica
	// that holds the session, where they go too.
	err       error
	elsewhere *store.Lease
	acquired  time.Time  // when the lease was taken; zero until then, and for a failed take-over
	loading   sync.Mutex // one load at a time; a live call waits for the load under way
	loaded    bool       // live here: created or loaded here (guarded by Replicas.mu)
}

// Time budgets of work a call starts for every later call too (a take-over, a load, a
// new session's lease): a caller that leaves does not cut it short for the others.
const (
	takeOverTimeout = 30 * time.Second
	loadTimeout     = 2 * time.Minute
	leaseTimeout    = 10 * time.Second
)

// NewReplicas returns this replica's lease keeper and router; Run renews its leases and
// Release gives them up.
func NewReplicas(opts ReplicaOptions) (*Replicas, error) {
	if opts.ID == "" || opts.Address == "" {
		return nil, errors.New("replica: id and address are required")
	}
	ttl := opts.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	id := opts.ID
	return &Replicas{id: id, address: opts.Address, token: opts.Token, ttl: ttl, leases: opts.Leases,
		owners: opts.Owners, hub: opts.Hub, successor: opts.Successor, principals: opts.Principals, logger: logger.With("replica", id),
		owned: map[string]*ownedSession{}, conns: map[string]*grpc.ClientConn{}, lastRenewal: time.Now(),
		lapsed: map[string]bool{}, sweepSkip: map[string]time.Time{}, connectedSince: time.Now()}, nil
}

// RunsHere reports whether a session's queued messages are this replica's to run, after
// making the session live here as a call that needs it live would: loaded, and taken
// over first when its owner's lease ran out. False when another replica holds it.
func (r *Replicas) RunsHere(ctx context.Context, sessionID string) (bool, error) {
	elsewhere, err := r.route(ctx, sessionID, callLive)
	return err == nil && elsewhere == nil, err
}

// Run renews this replica's leases every third of their ttl until ctx ends, each renewal
// bounded by that third, and every tenth while they fail (the replica is cut off from
// the database: it says so, and its streams end). A session whose lease lapsed (this
// replica stalled past the ttl, or lost the database) is no longer routed here: its calls
// go to whoever holds the lease now, or take it again. Its presenter session stays open,
// and a turn still running in it goes on: the next renewal takes the lease back if no
// other replica took it. Once another replica holds it, this one's events and writes of
// the session are fenced out (store.AppendFenced, Store.FenceMessages), and letGo closes
// the session here.
func (r *Replicas) Run(ctx context.Context) {
	tick := time.NewTicker(r.ttl / 3)
	defer tick.Stop()
	// The sweep for dead replicas' turns runs beside the renewals, so that a slow
	// take-over never holds a renewal back; one sweep at a time, the next after a renewal.
	sweep := make(chan struct{}, 1)
	var sweeper sync.WaitGroup
	sweeper.Add(1)
	go func() {
		defer sweeper.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sweep:
				r.letGo(ctx)
				r.endOrphanedTurns(ctx)
			}
		}
	}()
	defer sweeper.Wait()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, r.ttl/3)
		renewed, err := r.leases.RenewLeases(rctx, r.id, r.ttl)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				r.logger.Error("cut off from the database: could not renew the session leases; this replica stops serving its sessions "+
					"once its leases may have run out, and takes over none until it has been back for a lease's ttl", "err", err)
				// Tried again sooner than every third of the ttl: an owner that renews soon
				// after the database comes back keeps its sessions.
				tick.Reset(r.ttl / 10)
			}
			failing = true
			r.hub.SetCutOff(true)
			r.mu.Lock()
			r.connectedSince = time.Time{}
			r.mu.Unlock()
			continue
		}
		if failing {
			r.logger.Info("reached the database again: session leases are renewed", "sessions", len(renewed))
			tick.Reset(r.ttl / 3)
		}
		failing = false
		r.hub.SetCutOff(false)
		keep := make(map[string]bool, len(renewed))
		for _, id := range renewed {
			keep[id] = true
		}
		r.mu.Lock()
		if r.connectedSince.IsZero() {
			r.connectedSince = sent
		}
		r.lastRenewal = sent
		// A lease taken after the renewal was sent is not in it, and still held.
		r.dropOwnedLocked(func(id string, o *ownedSession) bool { return !keep[id] && o.acquired.Before(sent) })
		r.mu.Unlock()
		// Keep this replica's sequences near the top of the shared counter: a replica
		// that publishes little would otherwise go on numbering new events below older
		// ones of busier replicas, which retention deletes first.
		sctx, cancel := context.WithTimeout(ctx, r.ttl/6)
		if err := r.hub.SkipAhead(sctx); err != nil && ctx.Err() == nil {
			r.logger.Warn("could not move the event sequences ahead", "err", err)
		}
		cancel()
		select {
		case sweep <- struct{}{}:
		default: // the last sweep is still at work
		}
	}
}

// leasesFreshLocked says whether this replica's leases are surely still its own: the
// last renewal was sent less than a ttl ago, with a margin for the clocks' rates.
func (r *Replicas) leasesFreshLocked() bool {
	return time.Since(r.lastRenewal) < r.ttl-r.ttl/10
}

// orphanSweep is how many sessions one renewal takes over at most to end their turns;
// orphanRetry is how long it leaves one alone that another replica holds or that this
// one cannot run.
const (
	orphanSweep = 16
	orphanRetry = time.Minute
)

// endOrphanedTurns takes over the sessions whose owner died mid-turn, so that their
// subscribers see the turn end (OWNER_LOST) within a lease's ttl instead of at the
// session's next call, and those whose owner died or stopped with messages queued, so
// that they start (takeOverFor). Of replicas sweeping at once, the lease decides which
// one does.
func (r *Replicas) endOrphanedTurns(ctx context.Context) {
	ids, err := r.leases.LapsedWithUnfinishedWork(ctx, 4*orphanSweep)
	if err != nil {
		if ctx.Err() == nil {
			r.logger.Warn("could not look for turns or queues that dead replicas left", "err", err)
		}
		return
	}
	now := time.Now()
	r.mu.Lock()
	for id, until := range r.sweepSkip {
		if now.After(until) {
			delete(r.sweepSkip, id)
		}
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { _, skip := r.sweepSkip[id]; return skip })
	r.mu.Unlock()
	for _, id := range ids[:min(len(ids), orphanSweep)] {
		if ctx.Err() != nil {
			return
		}
		_, err := r.route(ctx, id, callEnd)
		r.mu.Lock()
		if _, owned := r.owned[id]; !owned && err == nil {
			// Another replica holds it, or it is no session this replica can run. One that
			// failed (the database away, a lock that stayed held) is tried at the next sweep.
			r.sweepSkip[id] = now.Add(orphanRetry)
		}
		r.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("could not take over a session whose replica died mid-turn", "session_id", id, "err", err)
		}
	}
}

// letGo closes here the sessions this replica still runs but whose lease another replica
// took over (after this one stalled or was cut off): their turns end, their agent process
// has one session less (and stops once idle), and what closing them would store or
// publish is fenced out, since the session is the other replica's now.
func (r *Replicas) letGo(ctx context.Context) {
	r.mu.Lock()
	ids := make([]string, 0, len(r.lapsed))
	for id := range r.lapsed {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		held, err := r.leases.SessionLease(ctx, id)
		if err != nil || held.Replica == r.id {
			continue // unknown for now, or still this replica's to take back
		}
		r.mu.Lock()
		_, owned := r.owned[id]
		if owned || !r.lapsed[id] {
			r.mu.Unlock()
			continue // taken back or closed meanwhile
		}
		delete(r.lapsed, id)
		r.mu.Unlock()
		p, err := r.owners.OwnerOf(ctx, id)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, leaseTimeout)
			err = p.CloseSession(cctx, id)
			cancel()
		}
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("could not close a session another replica took over", "session_id", id, "owner", held.Replica, "err", err)
			continue
		}
		r.logger.Info("let go of a session another replica took over", "session_id", id, "owner", held.Replica)
	}
}

// dropOwnedLocked stops serving the owned sessions lost says this replica's lease no
// longer covers: their calls go to whoever holds the lease now, or take it again.
func (r *Replicas) dropOwnedLocked(lost func(sessionID string, o *ownedSession) bool) {
	for id, o := range r.owned {
		// A failed take-over leaves owned before ready is closed, a successful one sets
		// acquired first: an entry with acquired set is a lease this replica holds.
		if !o.acquired.IsZero() && lost(id, o) {
			r.logger.Warn("this replica's lease of a session ran out", "session_id", id)
			delete(r.owned, id)
			if o.loaded {
				r.lapsed[id] = true
			}
		}
	}
}

// Release gives up every lease of this replica (at a graceful stop, after the sessions
// were closed), so that other replicas take its sessions at once, and closes the
// connections to other replicas.
func (r *Replicas) Release(ctx context.Context) error {
	r.mu.Lock()
	clear(r.owned)
	conns := r.conns
	r.conns = map[string]*grpc.ClientConn{}
	r.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return r.leases.ReleaseLeases(ctx, r.id)
}

// sessionCall says how a session-scoped method meets a session this replica does not
// hold yet.
type sessionCall int

const (
	// callRead and callEnd take the session over without loading it.
	callRead sessionCall = iota + 1
	callEnd
	// callLoad takes it over; the handler loads it.
	callLoad
	// callLive takes it over and loads it first: the call needs it live.
	callLive
)

// sessionMethods are the methods routed by their request's session_id.
var sessionMethods = map[string]sessionCall{
	pb.AgenticService_GetSession_FullMethodName:         callRead,
	pb.AgenticService_ListMessages_FullMethodName:       callRead,
	pb.AgenticService_GetMessage_FullMethodName:         callRead,
	pb.AgenticService_WaitMessage_FullMethodName:        callRead,
	pb.AgenticService_CloseSession_FullMethodName:       callEnd,
	pb.AgenticService_DeleteSession_FullMethodName:      callEnd,
	pb.AgenticService_LoadSession_FullMethodName:        callLoad,
	pb.AgenticService_SendMessage_FullMethodName:        callLive,
	pb.AgenticService_CancelMessage_FullMethodName:      callLive,
	pb.AgenticService_SetModel_FullMethodName:           callLive,
	pb.AgenticService_SetMode_FullMethodName:            callLive,
	pb.AgenticService_SetConfigOption_FullMethodName:    callLive,
	pb.AgenticService_ForkSession_FullMethodName:        callLive,
	pb.AgenticService_RespondPermission_FullMethodName:  callLive,
	pb.AgenticService_RespondElicitation_FullMethodName: callLive,
	pb.AgenticService_ShareSession_FullMethodName:       callRead,
}

// unary routes each session-scoped call to the session's owner: it runs here when this
// replica holds the session or takes it over, and is forwarded otherwise. A new session
// (CreateSession) belongs to the replica that created it.
func (r *Replicas) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if info.FullMethod == pb.AgenticService_CreateSession_FullMethodName {
		resp, err := next(ctx, req)
		if err == nil {
			r.created(ctx, resp.(*pb.CreateSessionResponse).GetSession().GetSessionId())
		}
		return resp, err
	}
	kind, ok := sessionMethods[info.FullMethod]
	sr, hasID := req.(interface{ GetSessionId() string })
	if !ok || !hasID || sr.GetSessionId() == "" {
		return next(ctx, req)
	}
	id := sr.GetSessionId()
	owner, err := r.route(ctx, id, kind)
	if err != nil {
		return nil, failWith(ctx, r.logger, info.FullMethod, err, "session_id", id)
	}
	if owner == nil {
		resp, err := next(ctx, req)
		if err == nil {
			r.ran(ctx, info.FullMethod, id)
		}
		return resp, err
	}
	resp, down, err := r.forward(ctx, *owner, info.FullMethod, req)
	if down && kind == callRead {
		// What the store holds answers a read while the owner is unreachable; only
		// what the owner keeps in memory (a reply in flight, pending requests) is
		// missing from it.
		return next(ctx, req)
	}
	return resp, err
}

// ran notes what a call that succeeded here did to the session: LoadSession made it live;
// CloseSession and DeleteSession leave nothing for this replica to hold (the store
// deletes a deleted session's lease itself).
func (r *Replicas) ran(ctx context.Context, method, sessionID string) {
	r.mu.Lock()
	o := r.owned[sessionID]
	switch {
	case method == pb.AgenticService_LoadSession_FullMethodName && o != nil:
		o.loaded = true
	case method == pb.AgenticService_DeleteSession_FullMethodName:
		delete(r.owned, sessionID)
	}
	if method == pb.AgenticService_CloseSession_FullMethodName || method == pb.AgenticService_DeleteSession_FullMethodName {
		delete(r.lapsed, sessionID) // not live here any more
	}
	r.mu.Unlock()
	if method != pb.AgenticService_CloseSession_FullMethodName || o == nil {
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseTimeout)
	defer cancel()
	// The close's last events first: once the lease is given up, another replica may take
	// the session, and this one's events of it are fenced out of the log.
	if !r.hub.WaitLogged(lctx) {
		r.logger.Warn("the closed session's last events are not in the event log yet; its lease is given up anyway", "session_id", sessionID)
	}
	if err := r.leases.ReleaseLeases(lctx, r.id, sessionID); err != nil {
		r.logger.Warn("could not give up the lease of a closed session; it stays this replica's", "session_id", sessionID, "err", err)
		return
	}
	r.mu.Lock()
	if r.owned[sessionID] == o {
		delete(r.owned, sessionID)
	}
	r.mu.Unlock()
}

// created records a session this replica has just created: it holds its lease from now.
func (r *Replicas) created(ctx context.Context, sessionID string) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseTimeout)
	defer cancel()
	acquired := time.Now()
	if _, err := r.leases.AcquireLease(lctx, sessionID, r.id, r.address, r.ttl); err != nil {
		// The session's next call routes it: here again, or to a replica that took it.
		r.logger.Error("could not take the lease of a new session", "session_id", sessionID, "err", err)
		return
	}
	done := make(chan struct{})
	close(done)
	r.mu.Lock()
	r.owned[sessionID] = &ownedSession{ready: done, acquired: acquired, loaded: true}
	r.mu.Unlock()
}

// route returns nil when the call runs here (taking the session over first if it must),
// else the lease of the replica it goes to.
func (r *Replicas) route(ctx context.Context, sessionID string, kind sessionCall) (*store.Lease, error) {
	r.mu.Lock()
	if !r.leasesFreshLocked() {
		r.dropOwnedLocked(func(string, *ownedSession) bool { return true })
	}
	o := r.owned[sessionID]
	if o == nil {
		o = &ownedSession{ready: make(chan struct{})}
		r.owned[sessionID] = o
		r.mu.Unlock()
		return r.takeOverFor(ctx, sessionID, kind, o)
	}
	r.mu.Unlock()
	select {
	case <-o.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	switch {
	case o.elsewhere != nil:
		return o.elsewhere, nil // another replica holds it: forward there too
	case errors.Is(o.err, errNotRouted):
		return nil, nil
	case o.err != nil:
		return nil, o.err
	case kind == callLive:
		return nil, r.load(ctx, sessionID, o)
	}
	return nil, nil
}

// takeOverFor runs the take-over of a session for the call that found it unowned here;
// o is its entry in owned, whose waiters learn the outcome when ready is closed.
func (r *Replicas) takeOverFor(ctx context.Context, sessionID string, kind sessionCall, o *ownedSession) (*store.Lease, error) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), takeOverTimeout)
	defer cancel()
	acquired := time.Now()
	lease, err := r.takeOver(tctx, sessionID)
	regained := errors.Is(err, errRegained)
	if regained {
		err = nil
	}
	if err != nil || lease != nil {
		o.err, o.elsewhere = err, lease
		r.mu.Lock()
		if r.owned[sessionID] == o {
			delete(r.owned, sessionID)
		}
		r.mu.Unlock()
		close(o.ready)
		if errors.Is(err, errNotRouted) {
			return nil, nil
		}
		return lease, err
	}
	r.mu.Lock()
	o.acquired, o.loaded = acquired, regained
	r.mu.Unlock()
	close(o.ready)
	r.successor.Due(sessionID)
	if kind == callLive {
		return nil, r.load(ctx, sessionID, o)
	}
	return nil, nil
}

// errNotRouted: the call runs here without a lease, and its handler answers it.
// errRegained: this replica took back the lease of a session it still runs.
var (
	errNotRouted = errors.New("not routed")
	errRegained  = errors.New("regained")
)

// takeOver takes the session's lease when no live replica holds it, and ends what the
// last owner left running; it returns the holder's lease when another replica holds it.
// A session without a configured agent here (unknown, or its agent left this replica's
// config) and no live owner is not routed: the handler says why (or deletes it).
func (r *Replicas) takeOver(ctx context.Context, sessionID string) (*store.Lease, error) {
	held, err := r.leases.SessionLease(ctx, sessionID)
	switch {
	case err == nil && !held.Expired && held.Replica != r.id:
		return &held, nil
	case err != nil && !errors.Is(err, store.ErrNoLease):
		return nil, fmt.Errorf("read the lease of session %s: %w", sessionID, err)
	case err == nil && held.Replica != r.id && held.Expires.UnixNano() != 0:
		// Another replica's lease ran out unreleased: it is this replica's to take only
		// when the owner failed to renew while the database answered here.
		r.mu.Lock()
		since := r.connectedSince
		r.mu.Unlock()
		if since.IsZero() || time.Since(since) < r.ttl {
			return nil, ownerUnavailable(held, errors.New("its lease ran out while this replica was cut off from the database; the owner may renew it first"))
		}
	}
	p, err := r.owners.OwnerOf(ctx, sessionID)
	if errors.Is(err, presenters.ErrNotFound) || errors.Is(err, presenters.ErrFailedPrecondition) {
		return nil, errNotRouted
	}
	if err != nil {
		return nil, err
	}
	lease, err := r.leases.AcquireLease(ctx, sessionID, r.id, r.address, r.ttl)
	if errors.Is(err, store.ErrLeaseHeld) {
		return &lease, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take the lease of session %s: %w", sessionID, err)
	}
	logger := r.logger.With("session_id", sessionID, "agent_id", p.AgentID())
	r.mu.Lock()
	// Regained: the lease was still this replica's (renewed: no previous holder; lease
	// rows are never deleted but with their session) or lapsed with nobody taking it.
	regained := r.lapsed[sessionID] && (lease.Previous == "" || lease.Previous == r.id)
	delete(r.lapsed, sessionID)
	r.mu.Unlock()
	if regained {
		// No other replica had it meanwhile: it is as this replica left it, live.
		logger.Info("regained the lease of a session this replica still runs")
		return nil, errRegained
	}
	interrupted, err := r.successor.EndPrevious(ctx, sessionID, logger)
	if err != nil {
		return nil, err
	}
	if lease.Previous != "" {
		logger.Info("took over a session from a replica whose lease ran out", "previous_owner", lease.Previous, "interrupted_replies", interrupted)
	}
	return nil, nil
}

// load opens a taken-over session here (session/load or resume, else its transcript, as
// LoadSession does), once; a live call that comes meanwhile waits for it.
func (r *Replicas) load(ctx context.Context, sessionID string, o *ownedSession) error {
	o.loading.Lock()
	defer o.loading.Unlock()
	r.mu.Lock()
	loaded := o.loaded
	r.mu.Unlock()
	if loaded {
		return nil
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
	defer cancel()
	p, err := r.owners.OwnerOf(lctx, sessionID)
	if err == nil {
		_, err = p.LoadSession(lctx, sessionID, presenters.LoadContext{})
	}
	if err != nil {
		return fmt.Errorf("load session %s on this replica: %w", sessionID, err)
	}
	r.mu.Lock()
	o.loaded = true
	r.mu.Unlock()
	return nil
}

// forward runs the call on the replica holding the session's lease, with the caller's
// metadata (its token included), and returns that replica's answer as it is; down says
// the owner could not be reached.
func (r *Replicas) forward(ctx context.Context, owner store.Lease, method string, req any) (resp any, down bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(forwardedHeader)) > 0 {
		return nil, false, failWith(ctx, r.logger, method, ownerUnavailable(owner,
			fmt.Errorf("session %s moved between replicas while its call was forwarded", owner.SessionID)), "session_id", owner.SessionID)
	}
	if owner.Address == r.address {
		// A lease a dead process at this address left (this one restarted): it runs out
		// by its time.
		return nil, true, failWith(ctx, r.logger, method, ownerUnavailable(owner,
			fmt.Errorf("the lease is held by %s, a former process at this address", owner.Replica)), "session_id", owner.SessionID)
	}
	// The caller's credentials, trace context and agenticd's own headers: not the
	// transport's (an HTTP/1.1 client's Connection header makes grpc-go refuse the call).
	out := metadata.MD{}
	for k, v := range md {
		if k == "authorization" || k == "traceparent" || k == "tracestate" || k == "baggage" || strings.HasPrefix(k, "agenticd-") {
			out[k] = v
		}
	}
	// This replica has checked the caller's credentials, which another replica may not
	// know (its local token, the local socket, a web session): the call goes on with the
	// token they all accept.
	if r.token != "" {
		out.Set("authorization", "Bearer "+r.token)
	}
	out.Set(forwardedHeader, r.id)
	// The owner trusts this beside the shared token alone (authenticator.authenticate);
	// whatever the caller sent under this name is replaced.
	out.Set(r.principals.Header(ctx))
	answer, err := newResponse(method)
	if err != nil {
		return nil, false, failWith(ctx, r.logger, method, err)
	}
	conn, err := r.conn(owner.Address)
	if err == nil {
		err = conn.Invoke(metadata.NewOutgoingContext(ctx, out), method, req, answer)
	}
	if err == nil {
		return answer, false, nil
	}
	if st, ok := status.FromError(err); ok && len(st.Details()) > 0 {
		return nil, false, err // the owner's own answer
	}
	if ctx.Err() != nil {
		return nil, false, failWith(ctx, r.logger, method, ctx.Err())
	}
	if conn != nil {
		// Replicas come and go at new addresses: one that does not answer is not kept.
		r.dropConn(owner.Address, conn)
	}
	return nil, true, failWith(ctx, r.logger, method, ownerUnavailable(owner, errors.New(status.Convert(err).Message())), "session_id", owner.SessionID)
}

// ownerUnavailable is SESSION_OWNER_UNAVAILABLE: retry once the owner's lease has run out.
func ownerUnavailable(owner store.Lease, err error) error {
	return withReason(pb.ErrorReason_ERROR_REASON_SESSION_OWNER_UNAVAILABLE,
		fmt.Errorf("the replica that owns session %s (%s) does not answer (%v); its lease ends by %s, then any replica takes the session over: retry",
			owner.SessionID, owner.Address, err, owner.Expires.UTC().Format(time.RFC3339Nano)),
		"owner", owner.Address, "lease_expires", owner.Expires.UTC().Format(time.RFC3339Nano))
}

// conn is the client connection to another replica, made once per address.
func (r *Replicas) conn(address string) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.conns[address]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connect to replica %s: %w", address, err)
	}
	r.conns[address] = c
	return c, nil
}

// dropConn closes the connection to address, unless another call has replaced it.
func (r *Replicas) dropConn(address string, c *grpc.ClientConn) {
	r.mu.Lock()
	if r.conns[address] == c {
		delete(r.conns, address)
	}
	r.mu.Unlock()
	_ = c.Close()
}

// responseTypes are the response types of the service's methods, by full method name,
// for forwarded calls.
var responseTypes = func() map[string]protoreflect.MessageType {
	sd := pb.File_agentic_v1_service_proto.Services().ByName("AgenticService")
	out := map[string]protoreflect.MessageType{}
	for i := range sd.Methods().Len() {
		m := sd.Methods().Get(i)
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName()); err == nil {
			out["/"+string(sd.FullName())+"/"+string(m.Name())] = mt
		}
	}
	return out
}()

// newResponse is an empty response message of a method of the service.
func newResponse(fullMethod string) (proto.Message, error) {
	mt := responseTypes[fullMethod]
	if mt == nil {
		return nil, fmt.Errorf("forward %s: not a method of %s", fullMethod, pb.AgenticService_ServiceDesc.ServiceName)
	}
	return mt.New().Interface(), nil
}
