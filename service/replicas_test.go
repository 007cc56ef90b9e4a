package service

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// Every method whose request names one session is routed to the session's owner, and
// its response type is known for forwarding: a method added to the service without a
// routing decision fails here.
func TestSessionMethodsCoverTheService(t *testing.T) {
	sd := pb.File_agentic_v1_service_proto.Services().ByName("AgenticService")
	methods := sd.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		full := "/" + string(sd.FullName()) + "/" + string(m.Name())
		f := m.Input().Fields().ByName("session_id")
		names := f != nil && f.Kind() == protoreflect.StringKind && !f.IsList()
		_, routed := sessionMethods[full]
		if names != routed {
			t.Errorf("%s: its request names a session: %v; routed by session: %v", full, names, routed)
		}
		if !routed {
			continue
		}
		resp, err := newResponse(full)
		if err != nil {
			t.Errorf("%s: %v", full, err)
			continue
		}
		if got := resp.ProtoReflect().Descriptor().FullName(); got != m.Output().FullName() {
			t.Errorf("%s: forwarding would decode its answer as %s, want %s", full, got, m.Output().FullName())
		}
	}
	if _, err := newResponse("/" + pb.AgenticService_ServiceDesc.ServiceName + "/NoSuchMethod"); err == nil {
		t.Error("newResponse of an unknown method: no error")
	}
}

// fakeLeases is a LeaseStore whose answers the test chooses.
type fakeLeases struct {
	lease   func(ctx context.Context, sessionID string) (store.Lease, error)
	acquire func(ctx context.Context, sessionID string) (store.Lease, error)
}

var _ LeaseStore = (*fakeLeases)(nil)

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

// newTestReplicas is a replica over an SQLite store that knows session s1 of agent
// fake.a, with the lease store given.
func newTestReplicas(t *testing.T, leases LeaseStore) (*Replicas, *fakePresenter) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	hub, err := NewHub(ctx, HubOptions{Store: st, Log: st, Replica: "me"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Close)
	fake := newFake("fake.a", hub)
	reg, err := NewRegistry(st, []presenters.Presenter{fake})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddSessionOwner(ctx, store.SessionOwner{SessionID: "s1", AgentID: "fake.a"}); err != nil {
		t.Fatal(err)
	}
	r, err := NewReplicas(ReplicaOptions{ID: "me", Address: "127.0.0.1:1", Leases: leases, Owners: reg, Hub: hub,
		Successor: &TakeOvers{Store: st, Hub: hub}, Principals: ForwardedPrincipal{}})
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
	r, _ := newTestReplicas(t, &fakeLeases{lease: func(context.Context, string) (store.Lease, error) {
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
			go func() { l, err := r.route(context.Background(), "s1", callLive); results <- routed{l, err} }()
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
	r, fake := newTestReplicas(t, &fakeLeases{lease: noLease,
		acquire: func(_ context.Context, id string) (store.Lease, error) {
			return store.Lease{SessionID: id, Replica: "me"}, nil
		}})
	var loads atomic.Int32
	loading, finish := make(chan struct{}, 1), make(chan struct{})
	fake.loadFn = func(_ context.Context, id string, _ presenters.LoadContext) (presenters.SessionInfo, error) {
		loads.Add(1)
		loading <- struct{}{}
		<-finish
		return presenters.SessionInfo{SessionID: id}, nil
	}
	ctx := context.Background()
	if _, err := r.route(ctx, "s1", callRead); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for range 2 {
		go func() { _, err := r.route(ctx, "s1", callLive); done <- err }()
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
	r.mu.Lock()
	delete(r.owned, "s1")
	r.mu.Unlock()
	if _, err := r.route(ctx, "s1", callLoad); err != nil {
		t.Fatal(err)
	}
	r.ran(ctx, pb.AgenticService_LoadSession_FullMethodName, "s1")
	if _, err := r.route(ctx, "s1", callLive); err != nil {
		t.Fatal(err)
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("%d loads after LoadSession ran here; want still 1", n)
	}
}
