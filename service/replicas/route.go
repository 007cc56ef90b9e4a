package replicas

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

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

// Unary is the gRPC interceptor that routes each session-scoped call to the session's
// owner: it runs here when this replica holds the session or takes it over, and is
// forwarded otherwise. A new session (CreateSession) belongs to the replica that created
// it. The handler's and the owner's answers pass as they are; the routing's own failures
// are errors (*OwnerUnavailableError, the store's, the context's), which the caller turns
// into statuses.
func (r *Replica) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
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
		return nil, err
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
func (r *Replica) ran(ctx context.Context, method, sessionID string) {
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
func (r *Replica) created(ctx context.Context, sessionID string) {
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
func (r *Replica) route(ctx context.Context, sessionID string, kind sessionCall) (*store.Lease, error) {
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
func (r *Replica) takeOverFor(ctx context.Context, sessionID string, kind sessionCall, o *ownedSession) (*store.Lease, error) {
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
func (r *Replica) takeOver(ctx context.Context, sessionID string) (*store.Lease, error) {
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
			return nil, &OwnerUnavailableError{Owner: held, Err: errors.New("its lease ran out while this replica was cut off from the database; the owner may renew it first")}
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
func (r *Replica) load(ctx context.Context, sessionID string, o *ownedSession) error {
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
