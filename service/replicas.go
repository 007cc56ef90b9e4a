package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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

// forwardedHeader counts the replicas a forwarded call has passed; a call is forwarded
// at most once, so two replicas that disagree on an owner cannot bounce it between them.
const forwardedHeader = "agenticd-forwarded"

// SessionIDHeader is the request header a proxy may route by (ring hash) so that a
// session's calls reach its owner without the forwarding hop; agenticctl and the example
// clients set it.
const SessionIDHeader = "agenticd-session-id"

// LeaseStore holds the session leases of the replicas sharing a database; *store.Store is
// one.
type LeaseStore interface {
	AcquireLease(ctx context.Context, sessionID, replica, address string, ttl time.Duration) (store.Lease, error)
	RenewLeases(ctx context.Context, replica string, ttl time.Duration) ([]string, error)
	ReleaseLeases(ctx context.Context, replica string, sessionIDs ...string) error
	LapsedWithReplyInProgress(ctx context.Context, limit int) ([]string, error)
}

var _ LeaseStore = (*store.Store)(nil)

// ReplicaOptions configures Replicas.
type ReplicaOptions struct {
	// ID names this replica in the lease table; Address is where the others reach it
	// (host:port of its gRPC listener).
	ID, Address string
	// LeaseTTL is DefaultLeaseTTL when 0.
	LeaseTTL time.Duration
	Leases   LeaseStore
	// Store is where a taken-over session's interrupted replies are marked and rebuilt.
	Store    *store.Store
	Registry *Registry
	Hub      *Hub
	Logger   *slog.Logger
}

// Replicas is this replica's part in a group of agenticd replicas on one database. Each
// session is owned by one replica, through a lease row it renews while it lives. A
// session's call that reaches another replica is forwarded to the owner; a call for a
// session whose owner's lease ran out takes the session over here: the sequence counter
// jumps above every sequence issued so far (so the session's events keep rising), the
// reply the dead owner left running is ended as interrupted, visibly, and the session is
// loaded again before the first call that needs it live.
type Replicas struct {
	id, address string
	ttl         time.Duration
	leases      LeaseStore
	st          *store.Store
	registry    *Registry
	hub         *Hub
	logger      *slog.Logger

	mu    sync.Mutex
	owned map[string]*ownedSession
	conns map[string]*grpc.ClientConn // by owner address, for forwarding
	// lastRenewal is when the leases were last renewed; after a whole ttl without one,
	// other replicas may have taken them, and owned is emptied.
	lastRenewal time.Time
	// lapsed are the sessions dropped from owned because their lease ran out unrenewed
	// (this replica stalled): still live here, so regaining one is not a take-over.
	lapsed map[string]bool
}

// ownedSession is a session this replica holds the lease of.
type ownedSession struct {
	ready  chan struct{} // closed once the take-over is done (at once for a new session)
	err    error         // the take-over's failure, for the calls that waited on it
	loaded bool          // live here: created here, or loaded since it was taken over
}

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
	return &Replicas{id: opts.ID, address: opts.Address, ttl: ttl, leases: opts.Leases, st: opts.Store,
		registry: opts.Registry, hub: opts.Hub, logger: logger.With("replica", opts.ID),
		owned: map[string]*ownedSession{}, conns: map[string]*grpc.ClientConn{}, lastRenewal: time.Now(), lapsed: map[string]bool{}}, nil
}

// Run renews this replica's leases every third of their ttl until ctx ends. A session
// whose lease another replica took meanwhile (this replica stalled past the ttl) is no
// longer served here: its calls go to the new owner.
func (r *Replicas) Run(ctx context.Context) {
	tick := time.NewTicker(r.ttl / 3)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		renewed, err := r.leases.RenewLeases(ctx, r.id, r.ttl)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				r.logger.Error("could not renew the session leases; other replicas take the sessions over once they expire", "err", err)
			}
			failing = true
			r.mu.Lock()
			if time.Since(r.lastRenewal) > r.ttl && len(r.owned) > 0 {
				r.logger.Error("session leases expired unrenewed: this replica stops serving its sessions", "sessions", len(r.owned))
				r.dropOwnedLocked(func(string) bool { return true })
			}
			r.mu.Unlock()
			continue
		}
		if failing {
			r.logger.Info("session leases are renewed again")
		}
		failing = false
		keep := make(map[string]bool, len(renewed))
		for _, id := range renewed {
			keep[id] = true
		}
		r.mu.Lock()
		r.lastRenewal = time.Now()
		r.dropOwnedLocked(func(id string) bool { return !keep[id] })
		r.mu.Unlock()
		// Keep this replica's sequences near the top of the shared counter: a replica
		// that publishes little would otherwise go on numbering new events below older
		// ones of busier replicas, which retention deletes first.
		if err := r.hub.SkipAhead(ctx); err != nil && ctx.Err() == nil {
			r.logger.Warn("could not move the event sequences ahead", "err", err)
		}
		r.endOrphanedTurns(ctx)
	}
}

// orphanSweep is how many sessions one renewal takes over at most to end their turns.
const orphanSweep = 16

// endOrphanedTurns takes over the sessions whose owner died mid-turn, so that their
// subscribers see the turn end (OWNER_LOST) within a lease's ttl instead of at the
// session's next call. Of replicas sweeping at once, the lease decides which one does.
func (r *Replicas) endOrphanedTurns(ctx context.Context) {
	ids, err := r.leases.LapsedWithReplyInProgress(ctx, orphanSweep)
	if err != nil {
		if ctx.Err() == nil {
			r.logger.Warn("could not look for turns that dead replicas left running", "err", err)
		}
		return
	}
	for _, id := range ids {
		if _, err := r.route(ctx, id, callEnd); err != nil && ctx.Err() == nil {
			r.logger.Warn("could not take over a session whose replica died mid-turn", "session_id", id, "err", err)
		}
	}
}

// dropOwnedLocked stops serving the owned sessions lost says this replica's lease no
// longer covers: their calls go to whoever holds the lease now, or take it again.
func (r *Replicas) dropOwnedLocked(lost func(sessionID string) bool) {
	for id, o := range r.owned {
		if isClosed(o.ready) && o.err == nil && lost(id) {
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

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
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
	pb.AgenticService_CloseSession_FullMethodName:       callEnd,
	pb.AgenticService_DeleteSession_FullMethodName:      callEnd,
	pb.AgenticService_LoadSession_FullMethodName:        callLoad,
	pb.AgenticService_SendMessage_FullMethodName:        callLive,
	pb.AgenticService_CancelMessage_FullMethodName:      callLive,
	pb.AgenticService_SetModel_FullMethodName:           callLive,
	pb.AgenticService_SetMode_FullMethodName:            callLive,
	pb.AgenticService_RespondPermission_FullMethodName:  callLive,
	pb.AgenticService_RespondElicitation_FullMethodName: callLive,
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
		if err == nil && info.FullMethod == pb.AgenticService_DeleteSession_FullMethodName {
			r.mu.Lock()
			delete(r.owned, id) // the store deleted its lease with it
			r.mu.Unlock()
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

// created records a session this replica has just created: it holds its lease from now.
func (r *Replicas) created(ctx context.Context, sessionID string) {
	if _, err := r.leases.AcquireLease(ctx, sessionID, r.id, r.address, r.ttl); err != nil {
		// It stays usable here; another replica may take it over on its next call.
		r.logger.Error("could not take the lease of a new session", "session_id", sessionID, "err", err)
		return
	}
	done := make(chan struct{})
	close(done)
	r.mu.Lock()
	r.owned[sessionID] = &ownedSession{ready: done, loaded: true}
	r.mu.Unlock()
}

// route returns nil when the call runs here (taking the session over first if it must),
// else the lease of the replica it goes to.
func (r *Replicas) route(ctx context.Context, sessionID string, kind sessionCall) (*store.Lease, error) {
	for {
		r.mu.Lock()
		o := r.owned[sessionID]
		if o == nil {
			break // with r.mu held
		}
		r.mu.Unlock()
		select {
		case <-o.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if errors.Is(o.err, errNotRouted) {
			return nil, nil
		}
		if o.err != nil {
			return nil, o.err
		}
		if kind != callLive || o.loaded {
			return nil, nil
		}
		if err := r.load(ctx, sessionID, o); err != nil {
			return nil, err
		}
		return nil, nil
	}
	o := &ownedSession{ready: make(chan struct{})}
	r.owned[sessionID] = o
	r.mu.Unlock()
	lease, err := r.takeOver(ctx, sessionID)
	if errors.Is(err, errRegained) {
		o.loaded, err = true, nil
	}
	if err != nil || lease != nil {
		o.err = err
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
	close(o.ready)
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
// A session without a configured agent (unknown, or its agent left the config) is not
// routed: no replica can run it, and the handler says why (or deletes it).
func (r *Replicas) takeOver(ctx context.Context, sessionID string) (*store.Lease, error) {
	p, err := r.registry.ownerOf(ctx, sessionID)
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
	regained := r.lapsed[sessionID] && (lease.Previous == "" || lease.Previous == r.id)
	delete(r.lapsed, sessionID)
	r.mu.Unlock()
	if regained {
		// No other replica had it meanwhile: it is as this replica left it, live.
		logger.Info("regained the lease of a session this replica still runs")
		return nil, errRegained
	}
	// Every event of the session from here on is numbered above whatever the last owner
	// issued, so the session's order holds across owners.
	if err := r.hub.SkipAhead(ctx); err != nil {
		return nil, fmt.Errorf("take over session %s: %w", sessionID, err)
	}
	interrupted, err := r.st.MarkSessionInterrupted(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("take over session %s: %w", sessionID, err)
	}
	if err := RecoverInterruptedReplies(ctx, r.st, interrupted, logger); err != nil {
		return nil, err
	}
	for _, m := range interrupted {
		r.hub.Publish(presenters.Event{SessionID: sessionID, AgentID: p.AgentID(), Payload: presenters.ErrorPayload{
			Code: "owner_lost", MessageID: m.MessageID, Retryable: true,
			Message: "the replica that ran this reply stopped; the reply is kept as incomplete with what was sent"}})
		r.hub.Publish(presenters.Event{SessionID: sessionID, AgentID: p.AgentID(), Payload: presenters.MessageEndPayload{
			MessageID: m.MessageID, StopReason: presenters.StopError, Role: presenters.RoleAssistant}})
	}
	if lease.Previous != "" {
		logger.Info("took over a session from a replica whose lease ran out", "previous_owner", lease.Previous, "interrupted_replies", len(interrupted))
	}
	return nil, nil
}

// load opens a taken-over session here (session/load or resume, else its transcript, as
// LoadSession does), once.
func (r *Replicas) load(ctx context.Context, sessionID string, o *ownedSession) error {
	r.mu.Lock()
	loaded := o.loaded
	o.loaded = true // a concurrent call does not load it twice; a failed load is undone below
	r.mu.Unlock()
	if loaded {
		return nil
	}
	p, err := r.registry.ownerOf(ctx, sessionID)
	if err == nil {
		_, err = p.LoadSession(ctx, sessionID, presenters.LoadContext{})
	}
	if err != nil {
		r.mu.Lock()
		o.loaded = false
		r.mu.Unlock()
		return fmt.Errorf("load session %s on this replica: %w", sessionID, err)
	}
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
	out := metadata.MD{}
	for k, v := range md {
		switch {
		case strings.HasPrefix(k, ":"), strings.HasPrefix(k, "grpc-"), k == "content-type", k == "user-agent", k == "te":
		default:
			out[k] = v
		}
	}
	out.Set(forwardedHeader, strconv.Quote(r.id))
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

// newResponse is an empty response message of a method of the service.
func newResponse(fullMethod string) (proto.Message, error) {
	name := strings.TrimPrefix(fullMethod, "/"+pb.AgenticService_ServiceDesc.ServiceName+"/")
	sd := pb.File_agentic_v1_service_proto.Services().ByName(protoreflect.Name("AgenticService"))
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("forward %s: not a method of %s", fullMethod, sd.FullName())
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, fmt.Errorf("forward %s: %w", fullMethod, err)
	}
	return mt.New().Interface(), nil
}
