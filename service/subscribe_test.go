package service

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// checkConsecutive fails unless the events' sequences are from, from+1, ...
func checkConsecutive(t *testing.T, evs []*pb.AgenticEvent, from uint64) {
	t.Helper()
	for i, ev := range evs {
		if want := from + uint64(i); ev.GetSequence() != want {
			t.Fatalf("event %d has sequence %d, want %d (gap or duplicate)", i, ev.GetSequence(), want)
		}
	}
}

func TestSubscribeOrderAcrossSessions(t *testing.T) {
	e := newEnv(t, envOptions{})
	stream := e.subscribeLive(t, &pb.SubscribeRequest{})
	first := e.hub.LastSequence() + 1
	for i := range 300 {
		presenters.NewEmitter(e.hub, fakeID, fmt.Sprintf("s%d", i%3)).MessageDelta("m", presenters.RoleAssistant, strconv.Itoa(i))
	}
	evs := recvN(t, stream, 300)
	checkConsecutive(t, evs, first)
	for i, ev := range evs {
		if ev.GetMessageDelta().GetText() != strconv.Itoa(i) || ev.GetSessionId() != fmt.Sprintf("s%d", i%3) ||
			ev.GetType() != pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA || ev.GetTime() == nil {
			t.Fatalf("event %d = %v", i, ev)
		}
	}
}

func TestSubscribeFilters(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.storeSessions(t, fakeID, "s1", "s2", "s3")
	bySession := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{"s1", "s3"}})
	byAgent := e.subscribeLive(t, &pb.SubscribeRequest{AgentIds: []string{otherID}})
	both := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{"s1", "s2"}, AgentIds: []string{otherID}})
	publish := []struct{ agent, session string }{
		{fakeID, "s1"}, {otherID, "s2"}, {fakeID, "s3"}, {otherID, "s1"}, {fakeID, "s2"}, {otherID, "s3"},
	}
	for _, p := range publish {
		presenters.NewEmitter(e.hub, p.agent, p.session).StatusChanged(presenters.SessionIdle, "")
	}
	// A final event every filter matches, so that each stream ends at a known point.
	end := presenters.NewEmitter(e.hub, otherID, "s1").SessionClosed("end")
	for name, c := range map[string]struct {
		stream pb.AgenticService_SubscribeClient
		want   []string
	}{
		"sessions":        {bySession, []string{fakeID + "/s1", fakeID + "/s3", otherID + "/s1", otherID + "/s3"}},
		"agents":          {byAgent, []string{otherID + "/s2", otherID + "/s1", otherID + "/s3"}},
		"sessions+agents": {both, []string{otherID + "/s2", otherID + "/s1"}},
	} {
		var got []string
		for {
			ev := recv(t, c.stream)
			if ev.GetSequence() == end {
				break
			}
			got = append(got, ev.GetAgentId()+"/"+ev.GetSessionId())
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s filter got %v, want %v", name, got, c.want)
		}
	}
}

func TestSubscribeValidation(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, req := range []*pb.SubscribeRequest{{SessionIds: []string{"a", ""}}, {AgentIds: []string{""}}} {
		_, err := e.subscribe(t, req).Recv()
		wantCode(t, err, codes.InvalidArgument)
	}
}

// A subscription naming a session or an agent the server does not know is NOT_FOUND naming
// the first unknown one, instead of a stream that would wait forever; a stored session
// counts, loaded or not.
func TestSubscribeUnknownTargets(t *testing.T) {
	e := newEnv(t, envOptions{})
	created := e.createSession(t, fakeID).GetSessionId()
	e.storeSessions(t, otherID, "stored-only")
	for _, c := range []struct {
		req     *pb.SubscribeRequest
		mention []string
	}{
		{&pb.SubscribeRequest{SessionIds: []string{created, "nope", "nope-2"}}, []string{"session_ids[1]", `unknown session "nope"`, "ListSessions"}},
		{&pb.SubscribeRequest{AgentIds: []string{fakeID, "acp.x.y"}}, []string{"agent_ids[1]", `unknown agent "acp.x.y"`, "ListAgents"}},
		{&pb.SubscribeRequest{SessionIds: []string{created}, AgentIds: []string{"acp.x.y"}}, []string{`unknown agent "acp.x.y"`}},
	} {
		_, err := e.subscribe(t, c.req).Recv()
		st := wantCode(t, err, codes.NotFound)
		for _, m := range c.mention {
			if !strings.Contains(st.Message(), m) {
				t.Errorf("%v: message %q should say %q", c.req, st.Message(), m)
			}
		}
	}
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{created, "stored-only"}, AgentIds: []string{otherID}})
	seq := presenters.NewEmitter(e.hub, otherID, "stored-only").StatusChanged(presenters.SessionIdle, "")
	if ev := recv(t, stream); ev.GetSequence() != seq {
		t.Errorf("got event %v, want the stored session's %d", ev, seq)
	}
}

// Resuming while events keep coming: the replay and the live stream meet with no gap and
// no duplicate.
func TestSubscribeResumeWhilePublishing(t *testing.T) {
	e := newEnv(t, envOptions{})
	seqs := publishDeltas(e.hub, fakeID, "s", 100)
	after := seqs[49]
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		publishDeltas(e.hub, fakeID, "s", 200)
	}()
	stream := e.subscribe(t, &pb.SubscribeRequest{AfterSequence: after})
	wg.Wait()
	final := e.hub.LastSequence()
	evs := recvN(t, stream, int(final-after))
	checkConsecutive(t, evs, after+1)
}

func TestSubscribeOutOfRange(t *testing.T) {
	e := newEnv(t, envOptions{hub: HubOptions{Capacity: 8}})
	publishDeltas(e.hub, fakeID, "s", 20)
	last := e.hub.LastSequence()
	_, err := e.subscribe(t, &pb.SubscribeRequest{AfterSequence: 2}).Recv()
	st := wantCode(t, err, codes.OutOfRange)
	if !strings.Contains(st.Message(), "no longer held") || !strings.Contains(st.Message(), "GetSession") {
		t.Errorf("message %q should say the point is gone and how to rebuild", st.Message())
	}
	_, err = e.subscribe(t, &pb.SubscribeRequest{AfterSequence: last + 1}).Recv()
	st = wantCode(t, err, codes.OutOfRange)
	if !strings.Contains(st.Message(), "ahead of the newest") {
		t.Errorf("message %q", st.Message())
	}
	// The oldest held point still works.
	evs := recvN(t, e.subscribe(t, &pb.SubscribeRequest{AfterSequence: last - 8}), 8)
	checkConsecutive(t, evs, last-7)
}

// GetSession's last_sequence is a resume point for that session even after the ring has
// moved past its events.
func TestGetSessionThenSubscribeAfterRingMoved(t *testing.T) {
	e := newEnv(t, envOptions{hub: HubOptions{Capacity: 4}})
	id := e.createSession(t, fakeID).GetSessionId()
	publishDeltas(e.hub, fakeID, "busy", 10)
	got, err := e.client.GetSession(bg, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	stream := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{id}, AfterSequence: got.GetSession().GetLastSequence()})
	closed := presenters.NewEmitter(e.hub, fakeID, id).SessionClosed("done")
	if ev := recv(t, stream); ev.GetSequence() != closed {
		t.Errorf("first event after the snapshot = %d, want %d", ev.GetSequence(), closed)
	}
}

// A subscriber that stops reading is ended with RESOURCE_EXHAUSTED naming the last
// sequence it received; resuming from there delivers the rest; the publisher never waits.
func TestSubscribeOverflowThenResume(t *testing.T) {
	e := newEnv(t, envOptions{hub: HubOptions{SubscriberQueue: 4}})
	// Small fixed flow-control windows, so that an unread stream backs up into the queue.
	conn := dialBufconn(t, e.lis, "", grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	defer func() { _ = conn.Close() }()
	client := pb.NewAgenticServiceClient(conn)
	stream, err := client.Subscribe(t.Context(), &pb.SubscribeRequest{AfterSequence: e.hub.LastSequence()})
	if err != nil {
		t.Fatal(err)
	}
	// Once this event arrives the subscriber is registered: what follows goes through its
	// queue, not through a replay.
	em := presenters.NewEmitter(e.hub, fakeID, "s")
	start := em.MessageDelta("m", presenters.RoleAssistant, "ready")
	recv(t, stream)
	big := strings.Repeat("x", 32<<10)
	const total = 100 // 3.2 MB: far more than windows plus queue
	for range total {
		em.MessageDelta("m", presenters.RoleAssistant, big)
	}
	got, err := recvUntilErr(stream)
	st := wantCode(t, err, codes.ResourceExhausted)
	if len(got) == 0 || len(got) >= total {
		t.Fatalf("received %d events before the overflow", len(got))
	}
	checkConsecutive(t, got, start+1)
	last := got[len(got)-1].GetSequence()
	info := errorInfo(st)
	if info == nil || info.GetMetadata()["last_sequence"] != strconv.FormatUint(last, 10) ||
		!strings.Contains(st.Message(), fmt.Sprintf("after_sequence=%d", last)) {
		t.Fatalf("overflow status %q %v should name the last received sequence %d", st.Message(), info, last)
	}
	rest := recvN(t, e.subscribe(t, &pb.SubscribeRequest{AfterSequence: last}), int(start+total-last))
	checkConsecutive(t, rest, last+1)
}

func TestConcurrentSubscribers(t *testing.T) {
	e := newEnv(t, envOptions{})
	const subscribers, publishers, perPublisher = 8, 4, 250
	streams := make([]pb.AgenticService_SubscribeClient, subscribers)
	for i := range streams {
		streams[i] = e.subscribeLive(t, &pb.SubscribeRequest{})
	}
	first := e.hub.LastSequence() + 1
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			em := presenters.NewEmitter(e.hub, fakeID, fmt.Sprintf("s%d", p))
			for i := range perPublisher {
				em.MessageDelta("m", presenters.RoleAssistant, strconv.Itoa(i))
			}
		}()
	}
	errs := make(chan error, subscribers)
	for _, stream := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := map[string]int{}
			for i := range publishers * perPublisher {
				ev, err := stream.Recv()
				if err != nil {
					errs <- err
					return
				}
				if ev.GetSequence() != first+uint64(i) {
					errs <- fmt.Errorf("sequence %d at position %d, want %d", ev.GetSequence(), i, first+uint64(i))
					return
				}
				if n, _ := strconv.Atoi(ev.GetMessageDelta().GetText()); n != next[ev.GetSessionId()] {
					errs <- fmt.Errorf("session %s: event %d arrived when %d was due", ev.GetSessionId(), n, next[ev.GetSessionId()])
					return
				}
				next[ev.GetSessionId()]++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSubscribeEndsAtShutdownWithResumePoint(t *testing.T) {
	e := newEnv(t, envOptions{})
	stream := e.subscribeLive(t, &pb.SubscribeRequest{})
	seq := publishDeltas(e.hub, fakeID, "s", 1)[0]
	recv(t, stream)
	e.hub.Close()
	_, err := stream.Recv()
	st := wantCode(t, err, codes.Unavailable)
	if info := errorInfo(st); info == nil || info.GetMetadata()["last_sequence"] != strconv.FormatUint(seq, 10) {
		t.Errorf("shutdown status %q %v should carry last_sequence %d", st.Message(), info, seq)
	}
	_, err = e.subscribe(t, &pb.SubscribeRequest{}).Recv()
	wantCode(t, err, codes.Unavailable)
}
