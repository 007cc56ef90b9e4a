package replicas_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service"
	"github.com/agenticd/agenticd/service/replicas"
	"github.com/agenticd/agenticd/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeLeases is a LeaseStore whose answers the test chooses.
type fakeLeases struct {
	lease   func(ctx context.Context, sessionID string) (store.Lease, error)
	acquire func(ctx context.Context, sessionID string) (store.Lease, error)
}

var _ replicas.LeaseStore = (*fakeLeases)(nil)

func (f *fakeLeases) SessionLease(ctx context.Context, id string) (store.Lease, error) {
	return f.lease(ctx, id)
}

func (f *fakeLeases) AcquireLease(ctx context.Context, id, _, _ string, _ time.Duration) (store.Lease, error) {
	return f.acquire(ctx, id)
}
func (f *fakeLeases) RenewLeases(context.Context, string, time.Duration) ([]string, error) {
	return nil, nil
}
func (f *fakeLeases) ReleaseLeases(context.Context, string, ...string) error { return nil }
func (f *fakeLeases) LapsedWithUnfinishedWork(context.Context, int) ([]string, error) {
	return nil, nil
}

// loader is an agent whose LoadSession the test chooses; the routing calls nothing else
// of it but AgentID.
type loader struct {
	presenters.Presenter
	id   string
	load func(ctx context.Context, id string, lc presenters.LoadContext) (presenters.SessionInfo, error)
}

func (l *loader) AgentID() string { return l.id }

func (l *loader) LoadSession(ctx context.Context, id string, lc presenters.LoadContext) (presenters.SessionInfo, error) {
	return l.load(ctx, id, lc)
}

// newTestReplica is a replica over an SQLite store and the service's hub and registry
// that knows session s1 of agent fake.a, with the lease store given.
func newTestReplica(t *testing.T, leases replicas.LeaseStore) (*replicas.Replica, *loader) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	hub, err := service.NewHub(ctx, service.HubOptions{Store: st, Log: st, Replica: "me"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Close)
	fake := &loader{id: "fake.a"}
	reg, err := service.NewRegistry(st, []presenters.Presenter{fake})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddSessionOwner(ctx, store.SessionOwner{SessionID: "s1", AgentID: "fake.a"}); err != nil {
		t.Fatal(err)
	}
	r, err := replicas.New(replicas.Options{ID: "me", Address: "127.0.0.1:1", Leases: leases, Owners: reg, Hub: hub,
		Successor: &service.TakeOvers{Store: st, Hub: hub}, Principals: service.ForwardedPrincipal{}})
	if err != nil {
		t.Fatal(err)
	}
	return r, fake
}

func noLease(context.Context, string) (store.Lease, error) { return store.Lease{}, store.ErrNoLease }

// A call that waited for another call's look at the session, which found another
// replica holding its lease, is forwarded there too: it neither runs here nor reads
// the lease again.
func TestWaitersForwardWhenAnotherReplicaHoldsTheLease(t *testing.T) {
	var release chan struct{}
	var reads atomic.Int32
	other := store.Lease{SessionID: "s1", Replica: "other", Address: "10.0.0.9:1", Expires: time.Now().Add(time.Minute)}
	r, _ := newTestReplica(t, &fakeLeases{lease: func(context.Context, string) (store.Lease, error) {
		reads.Add(1)
		<-release
		return other, nil
	}})
	synctest.Test(t, func(t *testing.T) {
		release = make(chan struct{})
		type routed struct {
			lease *store.Lease
			err   error
		}
		results := make(chan routed, 2)
		for range 2 {
			go func() { l, err := r.Route(context.Background(), "s1", replicas.CallLive); results <- routed{l, err} }()
		}
		synctest.Wait() // one call reads the lease, the other waits on its entry
		close(release)
		for range 2 {
			got := <-results
			if got.err != nil || got.lease == nil || got.lease.Replica != "other" {
				t.Errorf("route = %+v, %v; want the other replica's lease (forward)", got.lease, got.err)
			}
		}
		if n := reads.Load(); n != 1 {
			t.Errorf("the lease was read %d times; want once, the waiter using what the first call found", n)
		}
	})
}

// Live calls that arrive together for a session taken over without a load wait for one
// load; LoadSession run here counts as the load.
func TestLiveCallsShareOneLoad(t *testing.T) {
	r, fake := newTestReplica(t, &fakeLeases{lease: noLease,
		acquire: func(_ context.Context, id string) (store.Lease, error) {
			return store.Lease{SessionID: id, Replica: "me"}, nil
		}})
	var loads atomic.Int32
	loading, finish := make(chan struct{}, 1), make(chan struct{})
	fake.load = func(_ context.Context, id string, _ presenters.LoadContext) (presenters.SessionInfo, error) {
		loads.Add(1)
		loading <- struct{}{}
		<-finish
		return presenters.SessionInfo{SessionID: id}, nil
	}
	ctx := context.Background()
	if _, err := r.Route(ctx, "s1", replicas.CallRead); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for range 2 {
		go func() { _, err := r.Route(ctx, "s1", replicas.CallLive); done <- err }()
	}
	<-loading
	select {
	case err := <-done:
		t.Fatalf("a live call went on (%v) while the session was still loading", err)
	default:
	}
	close(finish)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("%d loads; want 1", n)
	}

	// A LoadSession handler that ran here leaves nothing to load for a live call.
	r.Disown("s1")
	if _, err := r.Route(ctx, "s1", replicas.CallLoad); err != nil {
		t.Fatal(err)
	}
	r.Ran(ctx, pb.AgenticService_LoadSession_FullMethodName, "s1")
	if _, err := r.Route(ctx, "s1", replicas.CallLive); err != nil {
		t.Fatal(err)
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("%d loads after LoadSession ran here; want still 1", n)
	}
}
