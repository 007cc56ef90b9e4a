// Package replicas is this agenticd's part in a group of replicas on one Postgres
// database: it holds the leases of the sessions it owns, routes each session's calls to
// the replica that owns the session (forwarding them there), and takes over the sessions
// of replicas whose leases ran out. What a take-over does to the session itself, and how
// errors become gRPC statuses, is the service's: it reaches them through the small
// interfaces below.
package replicas

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// DefaultLeaseTTL is how long a replica's hold on a session lasts without renewal: the
// longest a dead replica's sessions wait before another replica may take them over.
const DefaultLeaseTTL = 15 * time.Second

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

// Owners finds the agent a stored session belongs to; the service's Registry is one.
type Owners interface {
	OwnerOf(ctx context.Context, sessionID string) (presenters.Presenter, error)
}

// Hub is what the router needs of this replica's event hub; the service's Hub is one.
type Hub interface {
	// SkipAhead numbers the events published after it above every sequence issued so far.
	SkipAhead(ctx context.Context) error
	// WaitLogged waits until the events published so far are in the event log.
	WaitLogged(ctx context.Context) bool
	// SetCutOff says whether this replica is cut off from the database.
	SetCutOff(cut bool)
}

// Successor is what the service does with a session taken over from a replica whose
// lease ran out; the service's TakeOvers is one.
type Successor interface {
	// EndPrevious ends, visibly, what the last owner left running, and returns how many
	// replies it ended.
	EndPrevious(ctx context.Context, sessionID string, logger *slog.Logger) (int, error)
	// Due starts the messages the last owner left queued.
	Due(sessionID string)
}

// Principals names the caller of a forwarded call for the owner, which trusts the name
// beside the replicas' shared token and ForwardedHeader; the service's
// ForwardedPrincipal is one.
type Principals interface {
	Header(ctx context.Context) (key, value string)
}

// Options configures Replica.
type Options struct {
	// ID names this process in the lease table: unique per process (a restart under the
	// same configured id must not renew, and hold forever, the leases its dead
	// predecessor left), and the same as the service's HubOptions.Replica. Address is
	// where the others reach it (host:port of its gRPC listener).
	ID, Address string
	// LeaseTTL is DefaultLeaseTTL when 0.
	LeaseTTL time.Duration
	// Token is the bearer token every replica accepts: forwarded calls carry it.
	Token      string
	Leases     LeaseStore
	Owners     Owners
	Hub        Hub
	Successor  Successor
	Principals Principals
	Logger     *slog.Logger
}

// Replica is this replica's part in a group of agenticd replicas on one database. Each
// session is owned by one replica, through a lease row it renews while it lives. A
// session's call that reaches another replica is forwarded to the owner; a call for a
// session whose owner's lease ran out takes the session over here: the sequence counter
// jumps above every sequence issued so far (so the session's events keep rising), the
// reply the dead owner left running is ended as interrupted, visibly, and the session is
// loaded again before the first call that needs it live.
type Replica struct {
	// id is this process's name in the lease table (Options.ID).
	id, address string
	token       string // sent on forwarded calls (Options.Token)
	ttl         time.Duration
	leases      LeaseStore
	owners      Owners
	hub         Hub
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
	loaded    bool       // live here: created or loaded here (guarded by Replica.mu)
}

// Time budgets of work a call starts for every later call too (a take-over, a load, a
// new session's lease): a caller that leaves does not cut it short for the others.
const (
	takeOverTimeout = 30 * time.Second
	loadTimeout     = 2 * time.Minute
	leaseTimeout    = 10 * time.Second
)

// New returns this replica's lease keeper and router; Run renews its leases and
// Release gives them up.
func New(opts Options) (*Replica, error) {
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
	return &Replica{id: id, address: opts.Address, token: opts.Token, ttl: ttl, leases: opts.Leases,
		owners: opts.Owners, hub: opts.Hub, successor: opts.Successor, principals: opts.Principals, logger: logger.With("replica", id),
		owned: map[string]*ownedSession{}, conns: map[string]*grpc.ClientConn{}, lastRenewal: time.Now(),
		lapsed: map[string]bool{}, sweepSkip: map[string]time.Time{}, connectedSince: time.Now()}, nil
}

// RunsHere reports whether a session's queued messages are this replica's to run, after
// making the session live here as a call that needs it live would: loaded, and taken
// over first when its owner's lease ran out. False when another replica holds it.
func (r *Replica) RunsHere(ctx context.Context, sessionID string) (bool, error) {
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
func (r *Replica) Run(ctx context.Context) {
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
func (r *Replica) leasesFreshLocked() bool {
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
func (r *Replica) endOrphanedTurns(ctx context.Context) {
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
func (r *Replica) letGo(ctx context.Context) {
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
func (r *Replica) dropOwnedLocked(lost func(sessionID string, o *ownedSession) bool) {
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
func (r *Replica) Release(ctx context.Context) error {
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
