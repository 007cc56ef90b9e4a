package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// answerClock is a settable clock.
type answerClock struct{ t time.Time }

func (c *answerClock) now() time.Time { return c.t }

// countingHandler answers CancelMessage with the call's number, so a test tells which
// calls did the work.
type countingHandler struct{ calls int }

func (h *countingHandler) handle(_ context.Context, req any) (any, error) {
	h.calls++
	return &pb.CancelMessageResponse{MessageId: strings.Repeat("m", h.calls)}, nil
}

func callWithID(t *testing.T, ic interceptors, h *countingHandler, requestID string) string {
	t.Helper()
	info := &grpc.UnaryServerInfo{FullMethod: pb.AgenticService_CancelMessage_FullMethodName}
	resp, err := ic.idempotentUnary(bg, &pb.CancelMessageRequest{SessionId: "s", RequestId: requestID}, info, h.handle)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*pb.CancelMessageResponse).GetMessageId()
}

// An answer is remembered for the TTL, then forgotten: a repeat after it does the work.
func TestRequestIDAnswersExpire(t *testing.T) {
	clock := &answerClock{t: time.Unix(1_700_000_000, 0)}
	ic := interceptors{logger: discard, answers: newAnswers(time.Minute, 100, 1<<20, clock.now)}
	h := &countingHandler{}
	first := callWithID(t, ic, h, "a")
	clock.t = clock.t.Add(time.Minute - time.Second)
	if got := callWithID(t, ic, h, "a"); got != first || h.calls != 1 {
		t.Fatalf("within the TTL: %q after %d calls, want %q from 1", got, h.calls, first)
	}
	clock.t = clock.t.Add(time.Second)
	if callWithID(t, ic, h, "a"); h.calls != 2 {
		t.Fatalf("after the TTL the work ran %d times, want 2", h.calls)
	}
	ic.answers.mu.Lock()
	defer ic.answers.mu.Unlock()
	if len(ic.answers.byID) != 1 || ic.answers.settled.Len() != 1 {
		t.Errorf("%d answers held, want the one fresh answer", len(ic.answers.byID))
	}
}

// However many ids clients send, the answers stay within their count and bytes: the
// oldest are forgotten first.
func TestRequestIDAnswersAreBounded(t *testing.T) {
	clock := &answerClock{t: time.Unix(1_700_000_000, 0)}
	ic := interceptors{logger: discard, answers: newAnswers(time.Hour, 2, 1<<20, clock.now)}
	h := &countingHandler{}
	for _, id := range []string{"a", "b", "c"} {
		callWithID(t, ic, h, id)
	}
	if callWithID(t, ic, h, "c"); h.calls != 3 {
		t.Errorf("the newest answer was forgotten (%d calls)", h.calls)
	}
	if callWithID(t, ic, h, "a"); h.calls != 4 {
		t.Errorf("the oldest answer outlived the count bound (%d calls)", h.calls)
	}

	ic = interceptors{logger: discard, answers: newAnswers(time.Hour, 100, 3*answerOverhead, clock.now)}
	h = &countingHandler{}
	for i := range 10 {
		callWithID(t, ic, h, strings.Repeat("x", i+1))
	}
	ic.answers.mu.Lock()
	held, bytes := len(ic.answers.byID), ic.answers.bytes
	ic.answers.mu.Unlock()
	if held > 3 || bytes > 3*answerOverhead {
		t.Errorf("%d answers of %d bytes held, want at most %d bytes", held, bytes, 3*answerOverhead)
	}
}
