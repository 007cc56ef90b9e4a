package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agenticd/agenticd/internal/localcred"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/acp"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/service"
	"github.com/agenticd/agenticd/service/replicas"
	"github.com/agenticd/agenticd/store"
	"github.com/agenticd/agenticd/web"
	"github.com/agenticd/agenticd/webhooks"
)

// DatabaseFile is the name of the SQLite database under the data dir.
const DatabaseFile = "agenticd.db"

// Deps is what agent constructors (acpPresenters, deepchatPresenters) get. The context they
// are called with bounds their start-up only; Presenter.Close ends what they start.
type Deps struct {
	// Publisher is the event hub: presenters emit through presenters.NewEmitter(Publisher, ...).
	Publisher presenters.Publisher
	// Roots admits workspaces (sessions' workspaces are already admitted by the service).
	Roots *sandbox.Roots
	// Store is the server's database, shared by every agent (each writes only its own
	// sessions' history).
	Store  *store.Store
	Logger *slog.Logger
}

// Server is a running agenticd.
type Server struct {
	cfg        Config
	logger     *slog.Logger
	store      *store.Store
	hub        *service.Hub
	presenters []presenters.Presenter
	grpc       *service.GRPCServer
	addr       string
	served     chan struct{} // closed when Serve returns
	serveErr   error         // Serve's result, readable once served is closed
	memory     *memoryReturner
	telemetry  *telemetry

	// The local credentials: the token in the data dir, the socket beside it (nil when
	// its path is too long), its Serve's end and result, and the web page's sign-in.
	localToken  string
	local       net.Listener
	localServed chan struct{}
	localErr    error
	webLogins   *service.WebLogins

	// In a group of replicas (database set): the lease keeper and router, and the end
	// of its lease renewal and of the database listener.
	replica     *replicas.Replica
	stopReplica context.CancelFunc
	replicaDone sync.WaitGroup

	// The queue of messages sent while their session's turn ran, and its end.
	stopQueue context.CancelFunc
	queueDone chan struct{}

	// The webhooks' delivering goroutine and its end (nil without webhooks).
	stopWebhooks context.CancelFunc
	webhooksDone chan struct{}

	stopOnce sync.Once
	stopErr  error
}

// Start opens the database, builds the hub, the sandbox roots and the agents, and serves
// gRPC (AgenticService, health, reflection) on cfg.Listen. Unset settings take their
// defaults. It refuses a config that would listen beyond loopback without a token.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{cfg: cfg, logger: logger, served: make(chan struct{})}
	listen := func() (net.Listener, error) {
		lis, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w (is another agenticd running? choose another address with --listen)", cfg.Listen, err)
		}
		s.addr = lis.Addr().String()
		return lis, nil
	}
	// A replica listens first, to advertise the port it got; otherwise clients are
	// refused, not left waiting, while agenticd starts.
	var lis net.Listener
	if cfg.Database != "" {
		if lis, err = listen(); err != nil {
			return nil, err
		}
	}
	if err := s.build(ctx); err != nil {
		if lis != nil {
			lis.Close()
		}
		s.release(context.WithoutCancel(ctx))
		return nil, err
	}
	if lis == nil {
		if lis, err = listen(); err != nil {
			s.release(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	if err := s.listenLocal(); err != nil {
		lis.Close()
		s.release(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := s.telemetry.serve(cfg.Metrics, logger); err != nil {
		lis.Close()
		if s.local != nil {
			s.local.Close()
		}
		s.release(context.WithoutCancel(ctx))
		return nil, err
	}
	go func() {
		defer close(s.served)
		s.serveErr = s.grpc.Serve(lis)
	}()
	s.localServed = make(chan struct{})
	go func() {
		defer close(s.localServed)
		if s.local != nil {
			s.localErr = s.grpc.ServeLocal(s.local)
		}
	}()
	idleRing := cfg.EventBufferBytes / idleRingFraction
	s.memory = startMemoryReturner(memoryCheckInterval, memoryReturnThreshold, func() int { return s.hub.TrimHeld(idleRing) }, logger)
	ids := make([]string, len(s.presenters))
	for i, p := range s.presenters {
		ids[i] = p.AgentID()
	}
	logger.Info("agenticd serving", "addr", s.addr, "local_socket", s.localSocketPath(), "data_dir", cfg.DataDir, "agents", ids,
		"workspace_roots", cfg.WorkspaceRoots, "tls", cfg.TLS.CertFile != "", "token", cfg.Token != "")
	code, _ := s.webLogins.NewCode()
	logger.Info("web page: open this link to sign in (it works once, for 15 minutes; `agenticctl web` makes another)",
		"url", s.pageURL()+service.LoginPath(code))
	if cfg.Token != "" && cfg.TLS.CertFile == "" && !isLoopback(hostOf(cfg.Listen)) {
		logger.Warn("the bearer token travels in clear text on a non-loopback address; configure tls.cert_file and tls.key_file")
	}
	return s, nil
}

// listenLocal opens the local socket in the data dir, which admits agenticd's own user
// without a token. A data dir whose path leaves no room for it costs only the socket:
// clients then read the token file.
func (s *Server) listenLocal() error {
	path := localcred.SocketPath(s.cfg.DataDir)
	lis, err := localcred.Listen(path, func(uid int) {
		s.logger.Warn("refused a connection to the local socket from another user", "uid", uid, "socket", path)
	})
	if errors.Is(err, localcred.ErrSocketPathTooLong) {
		s.logger.Warn("not serving the local socket: its path is too long; local clients use the token file instead", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("local socket: %w", err)
	}
	s.local = lis
	return nil
}

// localSocketPath is the local socket's path, "" when it is not served.
func (s *Server) localSocketPath() string {
	if s.local == nil {
		return ""
	}
	return s.local.Addr().String()
}

// LocalToken is the token in the data dir, which local clients (and tests) present.
func (s *Server) LocalToken() string { return s.localToken }

// pageURL is where a browser on this machine reaches the web page: the listener's
// address, with 127.0.0.1 for an unspecified host.
func (s *Server) pageURL() string {
	host, port, _ := net.SplitHostPort(s.addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	if s.cfg.TLS.CertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

func hostOf(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	return host
}

// build creates everything but the listener. On error, release undoes what was built.
func (s *Server) build(ctx context.Context) error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data_dir: %w", err)
	}
	token, err := localcred.LoadOrCreateToken(cfg.DataDir)
	if err != nil {
		return err
	}
	s.localToken = token
	// Cookies are signed with the configured token where there is one: replicas share
	// it, so a browser signed in on one is signed in on all.
	s.webLogins = service.NewWebLogins(cmp.Or(cfg.Token, s.localToken))
	st, err := s.openStore(ctx)
	if err != nil {
		return err
	}
	s.store = st
	if s.telemetry, err = newTelemetry(ctx, cfg, st, s.logger); err != nil {
		return err
	}
	replicated := cfg.Database != ""
	var replicaID, replicaAddress string
	if replicated {
		if replicaID, replicaAddress, err = replicaIdentity(cfg, s.addr); err != nil {
			return err
		}
		st.FenceMessages(replicaID)
	}
	var interrupted []store.InterruptedMessage
	if !replicated {
		// Before any agent serves: whatever reply a crash or a cut shutdown left in
		// progress (any agent's) is kept as incomplete. Replicas do this per session when
		// they take one over: other replicas' turns may be running.
		interrupted, err = st.MarkInterrupted(ctx)
		if err != nil {
			return err
		}
		if len(interrupted) > 0 {
			s.logger.Warn("replies interrupted by the last shutdown are kept as incomplete", "messages", len(interrupted))
		}
		// Before the hub starts: its log writer applies retention at once, and the
		// rebuild reads the interrupted replies' events from the log.
		if err := service.RecoverInterruptedReplies(ctx, st, interrupted, s.logger); err != nil {
			return err
		}
	}
	notifier, err := cfg.webhookNotifier(st, s.logger)
	if err != nil {
		return err
	}
	observers := s.telemetry.observers()
	if notifier != nil {
		observers = append(observers, notifier)
		webhooksCtx, stop := context.WithCancel(context.Background())
		s.stopWebhooks, s.webhooksDone = stop, make(chan struct{})
		go func() {
			defer close(s.webhooksDone)
			notifier.Run(webhooksCtx)
		}()
	}
	hub, err := service.NewHub(ctx, service.HubOptions{
		Capacity:          cfg.EventBuffer,
		MaxBytes:          cfg.EventBufferBytes,
		SubscriberQueue:   cfg.SubscriberQueue,
		HeartbeatInterval: cfg.HeartbeatInterval,
		Store:             st,
		Log:               st,
		LogRetention:      cfg.EventLog.retention(),
		AuditRetention:    cfg.Audit.retention(),
		Observers:         observers,
		Queue:             st,
		Replica:           replicaID,
		Logger:            s.logger,
	})
	if err != nil {
		return err
	}
	s.hub = hub
	if !replicated && notifier != nil {
		// Sessions' own webhooks from before the restart, which hear of the interrupted
		// replies' ends too; a replica takes each up with its session (replicas.Replica).
		if err := service.RestoreSessionWebhooks(ctx, st, notifier, s.logger); err != nil {
			return fmt.Errorf("read sessions' webhooks: %w", err)
		}
	}
	if !replicated {
		// A client waiting for an interrupted reply's end gets it, from the log too,
		// before anything serves.
		service.EndInterruptedReplies(hub, interrupted, service.InterruptServerRestarted)
		if !hub.WaitLogged(ctx) {
			return fmt.Errorf("log the ends of interrupted replies: %w", ctx.Err())
		}
	}
	opts := sandboxOptions(cfg)
	roots, err := sandbox.NewRoots(cfg.WorkspaceRoots, opts)
	if err != nil {
		return fmt.Errorf("workspace_roots: %w", err)
	}
	if err := checkConfinement(roots, opts.Confinement, s.logger); err != nil {
		return err
	}
	deps := Deps{Publisher: hub, Roots: roots, Store: st, Logger: s.logger}
	for _, build := range []func(context.Context, Config, Deps) ([]presenters.Presenter, error){acpPresenters, deepchatPresenters} {
		ps, err := build(ctx, cfg, deps)
		s.presenters = append(s.presenters, ps...)
		if err != nil {
			return fmt.Errorf("agents: %w", err)
		}
	}
	registry, err := service.NewRegistry(st, s.presenters)
	if err != nil {
		return err
	}
	s.telemetry.watch(hub, s.presenters)
	var replica *replicas.Replica
	if replicated {
		if replica, err = s.startReplica(registry, notifier, replicaID, replicaAddress); err != nil {
			return err
		}
	}
	principals, err := cfg.staticPrincipals()
	if err != nil {
		return err
	}
	creds := service.Credentials{Tokens: []string{cfg.Token, s.localToken}, Principals: principals, WebLogins: s.webLogins}
	if replicated {
		creds.ReplicaToken = cfg.Token
	}
	if creds.OIDC, err = s.oidcVerifier(cfg); err != nil {
		return err
	}
	svc := service.New(service.Options{Registry: registry, Hub: hub, Roots: roots, WebLogins: s.webLogins, PageURL: s.pageURL,
		Webhooks: notifier, Logger: s.logger})
	var router service.Router
	if replica != nil {
		hub.Queue().RunOnOwner(replica.RunsHere)
		router = replica
	}
	queueCtx, stopQueue := context.WithCancel(context.Background())
	s.stopQueue, s.queueDone = stopQueue, make(chan struct{})
	go func() {
		defer close(s.queueDone)
		hub.Queue().Run(queueCtx)
	}()
	s.grpc, err = service.NewGRPCServer(
		svc,
		s.telemetry.grpcOptions(service.GRPCOptions{
			Credentials: creds,
			TLSCertFile: cfg.TLS.CertFile, TLSKeyFile: cfg.TLS.KeyFile, ClientCAFile: cfg.TLS.ClientCAFile,
			Page: web.Handler(), AllowedOrigins: cfg.AllowedOrigins, Router: router, Answers: st, Logger: s.logger}),
	)
	return err
}

// startReplica joins the group of replicas on the database: it renews this replica's
// session leases and wakes the hub's log tails on every append any replica makes, until
// release stops both.
func (s *Server) startReplica(registry *service.Registry, notifier *webhooks.Notifier, id, address string) (*replicas.Replica, error) {
	replica, err := replicas.New(replicas.Options{ID: id, Address: address, LeaseTTL: s.cfg.Replica.LeaseTTL, Token: s.cfg.Token,
		Leases: s.store, Owners: registry, Hub: s.hub, Successor: &service.TakeOvers{Store: s.store, Hub: s.hub, Webhooks: notifier},
		Principals: service.ForwardedPrincipal{}, Logger: s.logger})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.replica, s.stopReplica = replica, cancel
	s.replicaDone.Add(2)
	go func() {
		defer s.replicaDone.Done()
		replica.Run(ctx)
	}()
	go func() {
		defer s.replicaDone.Done()
		if err := s.store.ListenEvents(ctx, s.logger, s.hub.WakeTails); err != nil {
			s.logger.Error("cannot listen for the event log's appends: subscribers on this replica get no new events", "err", err)
		}
	}()
	s.logger.Info("serving as a replica", "replica", id, "advertise", address, "lease_ttl", cmp.Or(s.cfg.Replica.LeaseTTL, replicas.DefaultLeaseTTL))
	return replica, nil
}

// replicaIdentity is this process's name among the replicas and the address the others
// forward to. The name is the configured id (default: the address) and a random suffix:
// a process restarted under the same id must not take its dead predecessor's leases for
// its own. The address is the configured one, else listen's host (the host name when it
// is unspecified) with the port the listener got.
func replicaIdentity(cfg Config, listening string) (id, address string, err error) {
	address = cfg.Replica.Advertise
	if address == "" {
		host := hostOf(cfg.Listen)
		_, port, _ := net.SplitHostPort(listening)
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			if host, err = os.Hostname(); err != nil {
				return "", "", fmt.Errorf("replica.advertise is unset and the host name is unknown (%w): set replica.advertise to where the other replicas reach this one", err)
			}
		}
		address = net.JoinHostPort(host, port)
	}
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return "", "", err
	}
	return cmp.Or(cfg.Replica.ID, address) + "/" + hex.EncodeToString(suffix[:]), address, nil
}

// openStore opens the configured database: Postgres when database is set, else the
// SQLite file in the data dir, checked for damage first.
// integrityCheckBudget bounds the start-up check of the SQLite file. Tests that damage a
// file raise it, so that a loaded machine cannot make the check stop short of the damage.
var integrityCheckBudget = store.IntegrityCheckBudget

func (s *Server) openStore(ctx context.Context) (*store.Store, error) {
	if s.cfg.Database != "" {
		st, err := store.OpenOnPostgresWith(ctx, s.cfg.Database, postgresLimits(cmp.Or(s.cfg.Replica.LeaseTTL, replicas.DefaultLeaseTTL)))
		if err == nil {
			s.logger.Info("history database on Postgres", "database", store.RedactDSN(s.cfg.Database))
		}
		return st, err
	}
	dbPath := filepath.Join(s.cfg.DataDir, DatabaseFile)
	integrity, err := store.CheckSQLite(ctx, dbPath, integrityCheckBudget)
	if err != nil {
		return nil, err
	}
	switch {
	case integrity.Empty:
		s.logger.Warn("the history database was an empty file; starting with an empty history. If it held sessions, stop agenticd and restore it from a backup",
			"file", dbPath)
	case integrity.Unchecked != nil:
		s.logger.Warn("could not check the history database for damage", "file", dbPath, "err", integrity.Unchecked)
	case integrity.Exists && !integrity.Finished:
		s.logger.Info("checked only part of the history database for damage in the time allowed; to check all of it, stop agenticd and run `sqlite3 FILE 'PRAGMA quick_check'`",
			"file", dbPath, "bytes", integrity.Size, "took", integrity.Elapsed)
	case integrity.Exists:
		s.logger.Debug("history database checked", "file", dbPath, "bytes", integrity.Size, "took", integrity.Elapsed)
	}
	return store.Open(ctx, dbPath)
}

// postgresLimits bound a stalled connection to a fifth of the lease ttl (between 1 s and
// 5 s): a transaction cut off mid-way lets go of the lease rows it locked well before
// another replica may take the sessions over. A store call gets twice that, and at most
// two thirds of the ttl, so that a caller of a replica cut off from the database hears
// UNAVAILABLE within a lease ttl (and tries again, by then perhaps on the replica that
// took its session over).
func postgresLimits(ttl time.Duration) store.PostgresLimits {
	limits := store.DefaultPostgresLimits
	limits.Stall = min(max(ttl/5, time.Second), limits.Stall)
	limits.Call = min(2*limits.Stall, ttl*2/3)
	return limits
}

// sandboxOptions keeps agenticd's own secrets from sessions: neither terminals nor ACP
// agent processes inherit the agents' API keys (nor any AGENTICD_* variable, which sandbox
// always hides; an agent's own env may set any of them), and no workspace reaches
// the data dir (the database), the config file (the token) or the TLS key, even when a
// workspace root such as the default, the home directory, contains them.
func sandboxOptions(cfg Config) sandbox.Options {
	var opts sandbox.Options
	for _, a := range cfg.Agents {
		if a.APIKeyEnv != "" {
			opts.HiddenEnv = append(opts.HiddenEnv, a.APIKeyEnv)
		}
	}
	// The keys the known agents read are hidden too, configured or found on PATH: each
	// agent keeps only its own (acp.Config.KeepEnv).
	for _, n := range append(defaultDeepChatSecrets(cfg), acp.AllKnownKeys()...) {
		if !slices.Contains(opts.HiddenEnv, n) {
			opts.HiddenEnv = append(opts.HiddenEnv, n)
		}
	}
	// Validate has checked the mode and the limits.
	opts.Confinement, _ = sandbox.ParseConfinementMode(cfg.Confinement)
	opts.Limits, _ = cfg.treeLimits()
	for _, p := range []string{cfg.DataDir, cfg.File, cfg.TLS.KeyFile} {
		if p != "" {
			opts.Excluded = append(opts.Excluded, p)
		}
	}
	return opts
}

// Addr is the address the server listens on (with the real port when Listen asked for 0).
func (s *Server) Addr() string { return s.addr }

// Done is closed when the server stopped serving (after Stop, or if serving failed).
func (s *Server) Done() <-chan struct{} { return s.served }

// Stop shuts down gracefully: health NOT_SERVING, event streams ended (clients are told
// where to resume), in-flight RPCs finished until ctx ends (then cut), then the agents
// closed with a budget of their own (ShutdownTimeout), and the database closed once every
// agent has. It is idempotent and returns the first Stop's result.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *Server) stop(ctx context.Context) error {
	s.logger.Info("agenticd stopping")
	if !s.grpc.Stop(ctx) {
		s.logger.Warn("RPCs still running at the shutdown deadline were cut off")
	}
	<-s.served
	<-s.localServed
	s.memory.Stop()
	err := s.release(ctx)
	if s.serveErr != nil {
		err = errors.Join(fmt.Errorf("serve: %w", s.serveErr), err)
	}
	if s.localErr != nil {
		err = errors.Join(fmt.Errorf("serve the local socket: %w", s.localErr), err)
	}
	s.logger.Info("agenticd stopped")
	return err
}

// release closes the agents, all at once, then the database. The agents get their own
// budget (ShutdownTimeout) whatever is left of ctx, whose deadline may have passed while
// RPCs finished: a Close cut short would leave turns writing to a closed database. ctx
// only passes on its values.
func (s *Server) release(ctx context.Context) error {
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if s.stopQueue != nil {
		// No queued message starts on a closing agent; the queue stays stored.
		s.stopQueue()
		<-s.queueDone
	}
	errs := make([]error, len(s.presenters))
	var wg sync.WaitGroup
	for i, p := range s.presenters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Close(closeCtx); err != nil {
				s.logger.Error("agent did not close cleanly", "agent_id", p.AgentID(), "err", err)
				errs[i] = fmt.Errorf("close agent %s: %w", p.AgentID(), err)
			}
		}()
	}
	// The database only once every Close has returned: closing agents still write (a
	// cancelled turn's last message, and their last events to the event log). The hub's
	// log writer goes before it (Stop has closed the hub already, unless start-up failed).
	wg.Wait()
	if s.stopWebhooks != nil {
		// After the agents, whose sessions' closing is a notice; before the database,
		// where what was not delivered is recorded as given up.
		s.stopWebhooks()
		<-s.webhooksDone
	}
	if s.hub != nil {
		s.hub.Close()
	}
	if s.replica != nil {
		// The sessions are closed and their last events logged: other replicas may take
		// them at once rather than after the leases' ttl.
		s.stopReplica()
		s.replicaDone.Wait()
		if err := s.replica.Release(closeCtx); err != nil {
			errs = append(errs, fmt.Errorf("release the session leases: %w", err))
		}
	}
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the store: %w", err))
		}
	}
	if s.telemetry != nil {
		errs = append(errs, s.telemetry.close(closeCtx))
	}
	return errors.Join(errs...)
}

// Run serves until ctx ends (cmd/agenticd cancels it on SIGINT/SIGTERM) or serving fails,
// then stops within cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	srv, err := Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	if limit, previous := setMemoryLimit(srv.cfg.EventBufferBytes); limit > 0 {
		defer debug.SetMemoryLimit(previous)
		srv.memory.ownLimit()
		logger.Debug("soft memory limit set", "limit_bytes", limit)
	}
	if procs := setMaxProcs(srv.cfg.MaxProcs); procs > 0 {
		defer runtime.SetDefaultGOMAXPROCS()
		logger.Debug("GOMAXPROCS set", "procs", procs, "cpus", runtime.NumCPU())
	}
	select {
	case <-ctx.Done():
	case <-srv.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), srv.cfg.ShutdownTimeout)
	defer cancel()
	return srv.Stop(stopCtx)
}

// NewLogger returns the slog logger the config asks for, writing to w.
func NewLogger(w io.Writer, cfg Config) (*slog.Logger, error) {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

func parseLevel(s string) (slog.Level, error) {
	var level slog.Level
	if s == "" {
		return slog.LevelInfo, nil
	}
	if err := level.UnmarshalText([]byte(s)); err != nil {
		return level, fmt.Errorf("log_level %q: use debug, info, warn or error", s)
	}
	return level, nil
}

// checkConfinement says at start-up what boundary the processes of sessions run under.
// What the kernel cannot enforce is a warning in auto mode and an error when the config
// asks for confinement: never a silent downgrade.
func checkConfinement(roots *sandbox.Roots, mode sandbox.ConfinementMode, logger *slog.Logger) error {
	missing := roots.ConfinementMissing()
	switch {
	case mode == sandbox.ConfineOff:
		logger.Warn("confinement is off: agents and their commands can read and write whatever agenticd's user can, agenticd's own files included", "confinement", roots.ConfinementState())
	case len(missing) == 0:
		logger.Info("agents and their commands run confined to their workspace", "confinement", roots.ConfinementState())
	case mode == sandbox.ConfineOn:
		return fmt.Errorf("confinement: on, but this machine cannot enforce it: %s; run on a kernel with Landlock and user namespaces, or set confinement: auto to run with less", strings.Join(missing, "; "))
	default:
		for _, m := range missing {
			logger.Warn("CONFINEMENT INCOMPLETE: agents and their commands run with less than the full boundary", "missing", m)
		}
	}
	for _, m := range roots.UnenforcedLimits() {
		logger.Warn("a limit of the sessions' process trees is not enforced: one session can starve the others", "limit", m)
	}
	return nil
}
