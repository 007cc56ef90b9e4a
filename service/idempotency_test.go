package service

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/store"
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

// requestUUID is a UUID of its own for each name, as request_id wants.
func requestUUID(name string) string { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)).String() }

func callWithID(t *testing.T, ic interceptors, h *countingHandler, requestID string) string {
	t.Helper()
	info := &grpc.UnaryServerInfo{FullMethod: pb.AgenticService_CancelMessage_FullMethodName}
	resp, err := ic.idempotentUnary(bg, &pb.CancelMessageRequest{SessionId: "s", RequestId: requestUUID(requestID)}, info, h.handle)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*pb.CancelMessageResponse).GetMessageId()
}

// An answer is remembered for the TTL, then forgotten: a repeat after it does the work.
func TestRequestIDAnswersExpire(t *testing.T) {
	clock := &answerClock{t: time.Unix(1_700_000_000, 0)}
	ic := interceptors{logger: discard, answers: newAnswers(nil, discard, time.Minute, 100, 1<<20, clock.now)}
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
	ic := interceptors{logger: discard, answers: newAnswers(nil, discard, time.Hour, 2, 1<<20, clock.now)}
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

	ic = interceptors{logger: discard, answers: newAnswers(nil, discard, time.Hour, 100, 3*answerOverhead, clock.now)}
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

// An answer kept in the database reaches a repeat in another process (a restart, another
// replica): it gets the first answer, error or response, and the work runs once; the
// same id with another request is REQUEST_ID_REUSED there too.
func TestRequestIDAnswersOutliveTheProcess(t *testing.T) {
	st, err := store.Open(bg, filepath.Join(t.TempDir(), "agenticd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	clock := &answerClock{t: time.Unix(1_700_000_000, 0)}
	process := func() interceptors {
		return interceptors{logger: discard, answers: newAnswers(st, discard, time.Minute, 100, 1<<20, clock.now)}
	}
	h := &countingHandler{}
	first := callWithID(t, process(), h, "a")
	if got := callWithID(t, process(), h, "a"); got != first || h.calls != 1 {
		t.Fatalf("a repeat in a new process: %q after %d calls, want %q from 1", got, h.calls, first)
	}

	info := &grpc.UnaryServerInfo{FullMethod: pb.AgenticService_CancelMessage_FullMethodName}
	failing := func(context.Context, any) (any, error) {
		h.calls++
		st, _ := toStatus(withReason(pb.ErrorReason_ERROR_REASON_MESSAGE_NOT_RUNNING, errors.New("message m is not running")))
		return nil, st.Err()
	}
	req := &pb.CancelMessageRequest{SessionId: "s", RequestId: requestUUID("b")}
	_, firstErr := process().idempotentUnary(bg, req, info, failing)
	_, againErr := process().idempotentUnary(bg, req, info, failing)
	if h.calls != 2 || status.Code(againErr) != status.Code(firstErr) || status.Convert(againErr).Message() != status.Convert(firstErr).Message() {
		t.Errorf("a failed call's repeat in a new process: %v after %d calls, want %v from 2", againErr, h.calls, firstErr)
	}

	other := &pb.CancelMessageRequest{SessionId: "other", RequestId: requestUUID("a")}
	if _, err := process().idempotentUnary(bg, other, info, h.handle); errorInfo(status.Convert(err)).GetReason() != "REQUEST_ID_REUSED" || h.calls != 2 {
		t.Errorf("the id with another request in a new process: %v (%d calls), want REQUEST_ID_REUSED", err, h.calls)
	}
	clock.t = clock.t.Add(time.Minute)
	if callWithID(t, process(), h, "a"); h.calls != 3 {
		t.Errorf("after the TTL a repeat in a new process ran the work %d times in all, want 3", h.calls)
	}
}

// A request_id must be a UUID; anything else is INVALID_ARGUMENT naming the field.
func TestRequestIDMustBeAUUID(t *testing.T) {
	ic := interceptors{logger: discard, answers: newAnswers(nil, discard, time.Minute, 100, 1<<20, time.Now)}
	info := &grpc.UnaryServerInfo{FullMethod: pb.AgenticService_CancelMessage_FullMethodName}
	h := &countingHandler{}
	for _, id := range []string{"r1", "0b7c7f4e-create", strings.Repeat("x", 300), "{0b7c7f4e-3f1a-4c2e-9d8b-5a6f7e8d9c0b}", "urn:uuid:0b7c7f4e-3f1a-4c2e-9d8b-5a6f7e8d9c0b"} {
		_, err := ic.idempotentUnary(bg, &pb.CancelMessageRequest{SessionId: "s", RequestId: id}, info, h.handle)
		if status.Code(err) != codes.InvalidArgument || violatedField(err) != "request_id" {
			t.Errorf("request_id %.40q: %v, want INVALID_ARGUMENT on request_id", id, err)
		}
	}
	if h.calls != 0 {
		t.Errorf("the work ran %d times for refused ids", h.calls)
	}
	if callWithID(t, ic, h, "fine"); h.calls != 1 {
		t.Errorf("a UUID was refused")
	}
}

// violatedField is the field of an error's BadRequest, "" without one.
func violatedField(err error) string {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}
