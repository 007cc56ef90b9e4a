package service

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

// after is the start point after_sequence = seq.
func after(seq uint64) *pb.SubscribeRequest_AfterSequence {
	return &pb.SubscribeRequest_AfterSequence{AfterSequence: seq}
}

// checkConsecutive fails unless the events' sequences are from, from+1, ...
func checkConsecutive(t *testing.T, evs []*pb.AgenticEvent, from uint64) {
	t.Helper()
	for i, ev := range evs {
		if want := from + uint64(i); ev.GetSequence() != want {
			t.Fatalf("event %d has sequence %d, want %d (gap or duplicate)", i, ev.GetSequence(), want)
		}
	}
}

// recvTexts reads events until one has sequence until, and returns each session's
// deltas' text joined. It fails unless sequences rise and until is met exactly: merged
// deltas may skip sequences, but never cross or pass a resume point.
func recvTexts(t *testing.T, stream *eventStream, until uint64) map[string]string {
	t.Helper()
	texts := map[string]*strings.Builder{}
	var last uint64
	for last < until {
		ev := recv(t, stream)
		if ev.GetSequence() <= last {
			t.Fatalf("sequence %d after %d", ev.GetSequence(), last)
		}
		last = ev.GetSequence()
		if texts[ev.GetSessionId()] == nil {
			texts[ev.GetSessionId()] = &strings.Builder{}
		}
		texts[ev.GetSessionId()].WriteString(ev.GetMessageDelta().GetText())
	}
	if last != until {
		t.Fatalf("the stream went from below %d to %d", until, last)
	}
	out := map[string]string{}
	for id, b := range texts {
		out[id] = b.String()
	}
	return out
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
			ev.GetType() != pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA || ev.GetEventTime() == nil {
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
		stream *eventStream
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
// no duplicate, event by event and with deltas merged.
func TestSubscribeResumeWhilePublishing(t *testing.T) {
	for _, unmerged := range []bool{true, false} {
		t.Run(fmt.Sprintf("unmerged_deltas=%v", unmerged), func(t *testing.T) {
			e := newEnv(t, envOptions{})
			seqs := publishDeltas(e.hub, fakeID, "s", 100)
			from := seqs[49]
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				publishDeltas(e.hub, fakeID, "s", 200)
			}()
			stream := e.subscribe(t, &pb.SubscribeRequest{Start: after(from), UnmergedDeltas: unmerged})
			wg.Wait()
			final := e.hub.LastSequence()
			if unmerged {
				checkConsecutive(t, recvN(t, stream, int(final-from)), from+1)
				return
			}
			if got := recvTexts(t, stream, final)["s"]; got != strings.Repeat("x", int(final-from)) {
				t.Errorf("got %d bytes of text, want %d", len(got), final-from)
			}
		})
	}
}

func TestSubscribeOutOfRange(t *testing.T) {
	e := newEnv(t, envOptions{hub: HubOptions{Capacity: 8}})
	publishDeltas(e.hub, fakeID, "s", 20)
	last := e.hub.LastSequence()
	_, err := e.subscribe(t, &pb.SubscribeRequest{Start: after(2)}).Recv()
	st := wantCode(t, err, codes.OutOfRange)
	if !strings.Contains(st.Message(), "no longer held") || !strings.Contains(st.Message(), "GetSession") {
		t.Errorf("message %q should say the point is gone and how to rebuild", st.Message())
	}
	if info := errorInfo(st); info.GetReason() != "RESUME_POINT_EXPIRED" || info.GetMetadata()["oldest_sequence"] != strconv.FormatUint(last-7, 10) ||
		info.GetMetadata()["newest_sequence"] != strconv.FormatUint(last, 10) {
		t.Errorf("expired resume point: %v", info)
	}
	_, err = e.subscribe(t, &pb.SubscribeRequest{Start: after(last + 1)}).Recv()
	st = wantCode(t, err, codes.OutOfRange)
	if !strings.Contains(st.Message(), "ahead of the newest") {
		t.Errorf("message %q", st.Message())
	}
	if info := errorInfo(st); info.GetReason() != "RESUME_POINT_UNKNOWN" || info.GetMetadata()["newest_sequence"] != strconv.FormatUint(last, 10) {
		t.Errorf("unknown resume point: %v", info)
	}
	// The oldest held point still works.
	evs := recvN(t, e.subscribe(t, &pb.SubscribeRequest{Start: after(last - 8), UnmergedDeltas: true}), 8)
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
	stream := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{id}, Start: after(got.GetSession().GetLastSequence())})
	closed := presenters.NewEmitter(e.hub, fakeID, id).SessionClosed("done")
	if ev := recv(t, stream); ev.GetSequence() != closed {
		t.Errorf("first event after the snapshot = %d, want %d", ev.GetSequence(), closed)
	}
}

// A subscriber that stops reading is ended with RESOURCE_EXHAUSTED naming the last
// sequence it received; resuming from there delivers the rest (event by event, or with
// deltas merged, the same text); the publisher never waits.
func TestSubscribeOverflowThenResume(t *testing.T) {
	for _, unmerged := range []bool{true, false} {
		t.Run(fmt.Sprintf("unmerged_deltas=%v", unmerged), func(t *testing.T) {
			e := newEnv(t, envOptions{hub: HubOptions{SubscriberQueue: 4}})
			// Small fixed flow-control windows, so that an unread stream backs up into the queue.
			conn := dialListener(t, e.lis, e.token, grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
			defer func() { _ = conn.Close() }()
			client := pb.NewAgenticServiceClient(conn)
			raw, err := client.Subscribe(t.Context(), &pb.SubscribeRequest{Start: after(e.hub.LastSequence()), UnmergedDeltas: unmerged})
			if err != nil {
				t.Fatal(err)
			}
			stream := &eventStream{AgenticService_SubscribeClient: raw}
			// Once this event arrives the subscriber is registered: what follows goes
			// through its queue, not through a replay.
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
			if len(got) == 0 || got[len(got)-1].GetSequence() >= start+total {
				t.Fatalf("received %d events, up to the last, before the overflow", len(got))
			}
			if unmerged {
				checkConsecutive(t, got, start+1)
			}
			var text strings.Builder
			for _, ev := range got {
				text.WriteString(ev.GetMessageDelta().GetText())
			}
			last := got[len(got)-1].GetSequence()
			if text.Len() != int(last-start)*len(big) {
				t.Fatalf("%d bytes of text up to sequence %d, want %d", text.Len(), last, int(last-start)*len(big))
			}
			info := errorInfo(st)
			if info == nil || info.GetMetadata()["last_sequence"] != strconv.FormatUint(last, 10) ||
				!strings.Contains(st.Message(), fmt.Sprintf("after_sequence=%d", last)) {
				t.Fatalf("overflow status %q %v should name the last received sequence %d", st.Message(), info, last)
			}
			resumed := e.subscribe(t, &pb.SubscribeRequest{Start: after(last), UnmergedDeltas: unmerged})
			if unmerged {
				checkConsecutive(t, recvN(t, resumed, int(start+total-last)), last+1)
				return
			}
			if rest := recvTexts(t, resumed, start+total)["s"]; len(rest) != int(start+total-last)*len(big) {
				t.Errorf("resumed with %d bytes of text, want %d", len(rest), int(start+total-last)*len(big))
			}
		})
	}
}

// Several publishers and subscribers at once: every subscriber gets every event in
// order, event by event, or with deltas merged, every session's text whole and in order.
func TestConcurrentSubscribers(t *testing.T) {
	for _, unmerged := range []bool{true, false} {
		t.Run(fmt.Sprintf("unmerged_deltas=%v", unmerged), func(t *testing.T) {
			e := newEnv(t, envOptions{})
			const subscribers, publishers, perPublisher = 8, 4, 250
			streams := make([]*eventStream, subscribers)
			for i := range streams {
				streams[i] = e.subscribeLive(t, &pb.SubscribeRequest{UnmergedDeltas: unmerged})
			}
			first := e.hub.LastSequence() + 1
			var wg sync.WaitGroup
			var want strings.Builder
			for i := range perPublisher {
				want.WriteString(strconv.Itoa(i) + ",")
			}
			for p := range publishers {
				wg.Go(func() {
					em := presenters.NewEmitter(e.hub, fakeID, fmt.Sprintf("s%d", p))
					for i := range perPublisher {
						em.MessageDelta("m", presenters.RoleAssistant, strconv.Itoa(i)+",")
					}
				})
			}
			if !unmerged {
				// Readers run while the publishers do, each until it has every session's
				// whole text.
				errs := make(chan error, subscribers)
				for _, stream := range streams {
					wg.Go(func() {
						texts := map[string]string{}
						var last uint64
						for whole := 0; whole < publishers; {
							ev, err := stream.next()
							if err != nil {
								errs <- err
								return
							}
							if ev.GetSequence() <= last {
								errs <- fmt.Errorf("sequence %d after %d", ev.GetSequence(), last)
								return
							}
							last = ev.GetSequence()
							id := ev.GetSessionId()
							texts[id] += ev.GetMessageDelta().GetText()
							if !strings.HasPrefix(want.String(), texts[id]) {
								errs <- fmt.Errorf("session %s: text %q is not how %q begins", id, texts[id], want.String())
								return
							}
							if len(texts[id]) == want.Len() {
								whole++
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				return
			}
			errs := make(chan error, subscribers)
			for _, stream := range streams {
				wg.Go(func() {
					next := map[string]int{}
					for i := range publishers * perPublisher {
						ev, err := stream.next()
						if err != nil {
							errs <- err
							return
						}
						if ev.GetSequence() != first+uint64(i) {
							errs <- fmt.Errorf("sequence %d at position %d, want %d", ev.GetSequence(), i, first+uint64(i))
							return
						}
						if got := ev.GetMessageDelta().GetText(); got != strconv.Itoa(next[ev.GetSessionId()])+"," {
							errs <- fmt.Errorf("session %s: event %q arrived when %d was due", ev.GetSessionId(), got, next[ev.GetSessionId()])
							return
						}
						next[ev.GetSessionId()]++
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

func TestSubscribeEndsAtShutdownWithResumePoint(t *testing.T) {
	e := newEnv(t, envOptions{})
	stream := e.subscribeLive(t, &pb.SubscribeRequest{})
	seq := publishDeltas(e.hub, fakeID, "s", 1)[0]
	recv(t, stream)
	e.hub.Close()
	_, err := stream.next()
	st := wantCode(t, err, codes.Unavailable)
	if info := errorInfo(st); info == nil || info.GetMetadata()["last_sequence"] != strconv.FormatUint(seq, 10) {
		t.Errorf("shutdown status %q %v should carry last_sequence %d", st.Message(), info, seq)
	}
	_, err = e.subscribe(t, &pb.SubscribeRequest{}).Recv()
	wantCode(t, err, codes.Unavailable)
}

// recvFrame reads the next frame.
func recvFrame(t *testing.T, stream *eventStream) *pb.SubscribeResponse {
	t.Helper()
	frame, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return frame
}

// frameSequences is the sequences of a frame's events.
func frameSequences(frame *pb.SubscribeResponse) []uint64 {
	var out []uint64
	for _, ev := range frame.GetEvents().GetEvents() {
		out = append(out, ev.GetSequence())
	}
	return out
}

// Events that already wait travel in one frame; events that come one at a time travel
// one per frame. The replay ends with caught_up at the newest sequence. By default the
// waiting deltas of one message travel as one event, with the last one's sequence.
func TestSubscribeBatchesWhatWaits(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.storeSessions(t, fakeID, "s")
	from := e.hub.LastSequence()
	burst := publishDeltas(e.hub, fakeID, "s", 50)
	stream := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{"s"}, Start: after(from), UnmergedDeltas: true})
	frame := recvFrame(t, stream)
	if got := frameSequences(frame); len(got) != len(burst) || got[0] != burst[0] || got[len(got)-1] != burst[len(burst)-1] {
		t.Fatalf("first frame %v, want the whole burst %d..%d in one batch", got, burst[0], burst[len(burst)-1])
	}
	checkConsecutive(t, frame.GetEvents().GetEvents(), burst[0])
	if got := recvFrame(t, stream).GetCaughtUp(); got == nil || got.GetSequence() != burst[len(burst)-1] {
		t.Fatalf("after the replay: %v, want caught_up %d", got, burst[len(burst)-1])
	}
	for range 5 {
		seq := publishDeltas(e.hub, fakeID, "s", 1)[0]
		if got := frameSequences(recvFrame(t, stream)); len(got) != 1 || got[0] != seq {
			t.Fatalf("frame %v, want only %d", got, seq)
		}
	}

	merged := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{"s"}, Start: after(from)})
	evs := recvFrame(t, merged).GetEvents().GetEvents()
	if len(evs) != 1 || evs[0].GetSequence() != e.hub.LastSequence() || evs[0].GetMessageDelta().GetText() != strings.Repeat("x", 55) {
		t.Fatalf("merged replay %v; want one delta of the 55 waiting, with the last sequence %d", evs, e.hub.LastSequence())
	}
}

// A live stream is caught up at once, at the newest sequence, and only once.
func TestSubscribeLiveIsCaughtUpAtOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	newest := e.hub.LastSequence()
	stream := e.subscribe(t, &pb.SubscribeRequest{})
	if got := recvFrame(t, stream).GetCaughtUp(); got == nil || got.GetSequence() != newest {
		t.Fatalf("first frame %v, want caught_up %d", got, newest)
	}
	seq := publishDeltas(e.hub, fakeID, "s", 1)[0]
	if got := frameSequences(recvFrame(t, stream)); len(got) != 1 || got[0] != seq {
		t.Fatalf("then %v, want event %d", got, seq)
	}
}

// A silent stream gets heartbeats, the first after the interval, and again after every
// silence; each carries the stream's resume point. A hub cut off from its database ends
// the stream at its next silence instead, UNAVAILABLE with the resume point.
func TestSubscribeHeartbeats(t *testing.T) {
	const interval = 20 * time.Millisecond
	e := newEnv(t, envOptions{hub: HubOptions{HeartbeatInterval: interval}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	raw, err := e.client.Subscribe(ctx, &pb.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stream := &eventStream{AgenticService_SubscribeClient: raw}
	caughtUp := recvFrame(t, stream).GetCaughtUp()
	if caughtUp == nil {
		t.Fatal("the first frame is not caught_up")
	}
	last := caughtUp.GetSequence() // where a resume would start
	for i := range 3 {
		hb := recvFrame(t, stream).GetHeartbeat()
		if hb == nil || hb.GetServerTime() == nil || hb.GetSequence() != last {
			t.Fatalf("frame %d of the silence: %v, want a heartbeat with sequence %d", i, hb, last)
		}
		if i == 1 {
			last = publishDeltas(e.hub, fakeID, "s", 1)[0]
			if got := frameSequences(recvFrame(t, stream)); len(got) != 1 || got[0] != last {
				t.Fatalf("frame %v, want event %d", got, last)
			}
		}
	}
	e.hub.cutOff.Store(true)
	_, err = stream.Recv()
	if info := errorInfo(status.Convert(err)); status.Code(err) != codes.Unavailable || info.GetReason() != "DATABASE_UNAVAILABLE" ||
		info.GetMetadata()["last_sequence"] != fmt.Sprint(last) {
		t.Fatalf("the stream of a hub cut off from its database ended with %v, want UNAVAILABLE DATABASE_UNAVAILABLE with last_sequence %d", err, last)
	}
	if got := e.hub.HeartbeatInterval(); got != interval {
		t.Errorf("HeartbeatInterval() = %v", got)
	}
}

// A subscriber filtered on session A keeps a resume point while session B's traffic
// passes a whole ring many times over: its last bookmark resumes with no gap and no
// duplicate, where the sequence of its last event has long expired.
func TestSubscribeBookmarkKeepsFilteredResumePoint(t *testing.T) {
	const ring, busy = 1000, 100_000
	e := newEnv(t, envOptions{hub: HubOptions{Capacity: ring}})
	e.storeSessions(t, fakeID, "A", "B")
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{"A"}})
	if _, err := stream.Header(); err != nil { // registered: what follows is live
		t.Fatal(err)
	}
	first := publishDeltas(e.hub, fakeID, "A", 1)[0]
	publishDeltas(e.hub, fakeID, "B", busy)
	newest := e.hub.LastSequence()
	var got []uint64
	var bookmark uint64
	for bookmark+ring/8 <= newest {
		frame := recvFrame(t, stream)
		got = append(got, frameSequences(frame)...)
		if b := frame.GetBookmark(); b != nil {
			if b.GetSequence() <= bookmark || b.GetSequence() > newest {
				t.Fatalf("bookmark %d after %d (newest %d)", b.GetSequence(), bookmark, newest)
			}
			bookmark = b.GetSequence()
		}
	}
	if len(got) != 1 || got[0] != first {
		t.Fatalf("events %v, want only A's %d", got, first)
	}
	_, err := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{"A"}, Start: after(first)}).Recv()
	wantCode(t, err, codes.OutOfRange) // without the bookmark, the stream could not resume
	second := publishDeltas(e.hub, fakeID, "A", 1)[0]
	resumed := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{"A"}, Start: after(bookmark)})
	if got := frameSequences(recvFrame(t, resumed)); len(got) != 1 || got[0] != second {
		t.Fatalf("resumed at bookmark %d: %v, want only %d", bookmark, got, second)
	}
	if cu := recvFrame(t, resumed).GetCaughtUp(); cu.GetSequence() != second {
		t.Errorf("caught_up %v, want %d", cu, second)
	}
}

// The types filter keeps only the types listed (with the other filters); UNSPECIFIED in
// the list is refused.
func TestSubscribeTypesFilter(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.storeSessions(t, fakeID, "s", "t")
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{"s"}, Types: []pb.AgenticEventType{
		pb.AgenticEventType_AGENTIC_EVENT_TYPE_STATUS_CHANGED, pb.AgenticEventType_AGENTIC_EVENT_TYPE_SESSION_CLOSED}})
	em := presenters.NewEmitter(e.hub, fakeID, "s")
	em.MessageDelta("m", presenters.RoleAssistant, "x")
	status := em.StatusChanged(presenters.SessionGenerating, "")
	presenters.NewEmitter(e.hub, fakeID, "t").StatusChanged(presenters.SessionIdle, "")
	em.MessageDelta("m", presenters.RoleAssistant, "y")
	closed := em.SessionClosed("end")
	if evs := recvN(t, stream, 2); evs[0].GetSequence() != status || evs[1].GetSequence() != closed {
		t.Errorf("got %v, want %d and %d", evs, status, closed)
	}
	for i, types := range [][]pb.AgenticEventType{
		{pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_END, pb.AgenticEventType_AGENTIC_EVENT_TYPE_UNSPECIFIED},
		{pb.AgenticEventType(999)},
	} {
		_, err := e.subscribe(t, &pb.SubscribeRequest{Types: types}).Recv()
		st := wantCode(t, err, codes.InvalidArgument)
		if want := fmt.Sprintf("types[%d]", len(types)-1); !strings.Contains(st.Message(), want) || (i == 0 && !strings.Contains(st.Message(), "UNSPECIFIED")) {
			t.Errorf("%v: message %q should name %s", types, st.Message(), want)
		}
	}
}

// oldest_held replays everything the ring holds, then is caught up and live.
func TestSubscribeOldestHeld(t *testing.T) {
	e := newEnv(t, envOptions{hub: HubOptions{Capacity: 8}})
	publishDeltas(e.hub, fakeID, "s", 20)
	last := e.hub.LastSequence()
	stream := e.subscribe(t, &pb.SubscribeRequest{Start: &pb.SubscribeRequest_OldestHeld{OldestHeld: true}, UnmergedDeltas: true})
	checkConsecutive(t, recvN(t, stream, 8), last-7)
	if oldest, newest := e.hub.HeldRange(); oldest != last-7 || newest != last {
		t.Errorf("HeldRange() = %d, %d; want %d, %d", oldest, newest, last-7, last)
	}
	if cu := recvFrame(t, stream).GetCaughtUp(); cu.GetSequence() != last {
		t.Errorf("caught_up %v, want %d", cu, last)
	}
	seq := publishDeltas(e.hub, fakeID, "s", 1)[0]
	if ev := recv(t, stream); ev.GetSequence() != seq {
		t.Errorf("live event %d, want %d", ev.GetSequence(), seq)
	}
}

// A heartbeat carries the stream's resume point: for a stream filtered on session A
// while only B's events pass (too few for a bookmark), the newest sequence, from which
// it resumes with nothing lost and nothing repeated.
func TestSubscribeHeartbeatCarriesResumePoint(t *testing.T) {
	e := newEnv(t, envOptions{hub: HubOptions{HeartbeatInterval: 20 * time.Millisecond}})
	e.storeSessions(t, fakeID, "A", "B")
	stream := e.subscribeLive(t, &pb.SubscribeRequest{SessionIds: []string{"A"}})
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	first := publishDeltas(e.hub, fakeID, "A", 1)[0]
	publishDeltas(e.hub, fakeID, "B", 10)
	newest := e.hub.LastSequence()
	var resume uint64
	for frames := 0; resume != newest; frames++ {
		if frames == 100 {
			t.Fatalf("100 frames, the last heartbeat at %d; want one at the newest sequence %d", resume, newest)
		}
		frame := recvFrame(t, stream)
		if seqs := frameSequences(frame); len(seqs) > 0 && (len(seqs) != 1 || seqs[0] != first) {
			t.Fatalf("events %v, want only A's %d", seqs, first)
		}
		if frame.GetBookmark() != nil {
			t.Fatalf("a bookmark after 10 skipped events: %v", frame)
		}
		if hb := frame.GetHeartbeat(); hb != nil {
			if hb.GetSequence() < resume || hb.GetSequence() > newest {
				t.Fatalf("heartbeat at %d after %d (newest %d)", hb.GetSequence(), resume, newest)
			}
			resume = hb.GetSequence()
		}
	}
	second := publishDeltas(e.hub, fakeID, "A", 1)[0]
	resumed := e.subscribe(t, &pb.SubscribeRequest{SessionIds: []string{"A"}, Start: after(resume)})
	if got := frameSequences(recvFrame(t, resumed)); len(got) != 1 || got[0] != second {
		t.Fatalf("resumed at heartbeat %d: %v, want only %d", resume, got, second)
	}
}
