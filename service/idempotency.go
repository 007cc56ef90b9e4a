package service

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// Retries: a client-chosen request_id makes a mutating call safe to repeat. The answer
// (response or error) of the first call with an id is remembered for requestIDTTL; a
// repeat within that time gets it instead of doing the work again, also while the first
// call still runs (it waits for it).
const (
	// requestIDTTL is how long an answer is remembered (ServerLimits.request_id_ttl).
	requestIDTTL = 10 * time.Minute
	// maxRequestIDRunes bounds a request_id; a UUID (36) is what clients are told to use.
	maxRequestIDRunes = 128
	// maxRememberedAnswers and maxRememberedBytes bound what the answers take, whatever
	// clients send: past either, the oldest answers are forgotten before their time (a
	// repeat of a forgotten one does the work again, as a call without request_id would).
	maxRememberedAnswers = 10_000
	maxRememberedBytes   = 32 << 20
	// answerOverhead is what one remembered answer costs beyond its response's and
	// error's bytes: the map entry, the list element, the fingerprint.
	answerOverhead = 256
)

// idempotentMethods are the calls that take a request_id.
var idempotentMethods = map[string]bool{
	pb.AgenticService_CreateSession_FullMethodName:      true,
	pb.AgenticService_SendMessage_FullMethodName:        true,
	pb.AgenticService_CancelMessage_FullMethodName:      true,
	pb.AgenticService_RespondPermission_FullMethodName:  true,
	pb.AgenticService_RespondElicitation_FullMethodName: true,
	pb.AgenticService_DeleteSession_FullMethodName:      true,
}

// answers remembers the answers of calls by request_id. Expired answers are dropped
// lazily, when a call comes in, so it needs no goroutine of its own.
type answers struct {
	ttl        time.Duration
	maxEntries int
	maxBytes   int
	now        func() time.Time

	mu      sync.Mutex
	byID    map[string]*answer
	settled *list.List // of *answer, settled ones only, oldest first (the order they expire in)
	bytes   int        // what the settled answers take
}

// answer is one call's answer; done is closed when it is settled (resp, err set) or
// abandoned (the first call's own client left: nobody got an answer worth repeating).
type answer struct {
	requestID   string
	method      string
	fingerprint [sha256.Size]byte
	done        chan struct{}

	resp      proto.Message
	err       error
	abandoned bool
	expires   time.Time
	size      int
}

func newAnswers(ttl time.Duration, maxEntries, maxBytes int, now func() time.Time) *answers {
	return &answers{ttl: ttl, maxEntries: maxEntries, maxBytes: maxBytes, now: now,
		byID: make(map[string]*answer), settled: list.New()}
}

// requestIDReused: the id came with another method or other fields before.
func requestIDReused(requestID, firstMethod string) error {
	return withReason(pb.ErrorReason_ERROR_REASON_REQUEST_ID_REUSED,
		invalidField("request_id", "request_id %q was used before for another request (a %s with other fields); use a new request_id (a fresh UUID) for every new request, and the same one only to repeat a request unchanged",
			requestID, firstMethod),
		"method", firstMethod)
}

// idempotentUnary is the interceptor that answers repeats of the idempotent methods.
// Calls without a request_id go straight through.
func (ic interceptors) idempotentUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if !idempotentMethods[info.FullMethod] {
		return next(ctx, req)
	}
	msg, ok := req.(interface {
		proto.Message
		GetRequestId() string
	})
	if !ok || msg.GetRequestId() == "" {
		return next(ctx, req)
	}
	requestID := msg.GetRequestId()
	method := path.Base(info.FullMethod)
	if n := utf8.RuneCountInString(requestID); n > maxRequestIDRunes {
		return nil, ic.refuse(ctx, method, invalidField("request_id", "request_id has %d characters, more than %d: use a UUID", n, maxRequestIDRunes))
	}
	fp, err := fingerprint(msg)
	if err != nil {
		return nil, ic.refuse(ctx, method, fmt.Errorf("fingerprint a %s request: %w", method, err))
	}
	// A request id is the caller's own: another principal's repeat is another request.
	key := callerOf(ctx).Name + "\x00" + requestID
	for {
		ans, first := ic.answers.claim(key, method, fp)
		if ans.method != method || ans.fingerprint != fp {
			return nil, ic.refuse(ctx, method, requestIDReused(requestID, ans.method))
		}
		if first {
			return ic.answers.run(ctx, ans, req, next)
		}
		select {
		case <-ans.done:
		case <-ctx.Done():
			return nil, ic.refuse(ctx, method, ctx.Err())
		}
		if ans.abandoned {
			continue // the first call's client left; this one does the work
		}
		if ans.err != nil {
			return nil, ans.err
		}
		return proto.Clone(ans.resp), nil
	}
}

// run does the work of the first call with an id and settles its answer. If this call's
// own client leaves before it is done (the answer is CANCELLED or DEADLINE_EXCEEDED
// because of that), the answer is abandoned, not remembered: the work did not happen, so
// a repeat must do it. So is an error that says to try again (worthRetrying). A panic
// abandons it too, and goes on to the recovery interceptor.
func (a *answers) run(ctx context.Context, ans *answer, req any, next grpc.UnaryHandler) (resp any, err error) {
	settled := false
	defer func() {
		if !settled {
			a.abandon(ans)
		}
	}()
	resp, err = next(ctx, req)
	if err != nil && (ctx.Err() != nil || worthRetrying(err)) {
		return resp, err
	}
	m, _ := resp.(proto.Message)
	if err == nil && m == nil {
		return resp, err // a handler's nil response: gRPC reports it, nothing to repeat
	}
	a.settle(ans, m, err)
	settled = true
	return resp, err
}

// worthRetrying reports an error whose request did nothing and may succeed when repeated
// (an agent starting, a busy session, a server under load or stopping, a fault): a
// repeat with the same request_id must do the work then, not get this error again.
func worthRetrying(err error) bool {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.Internal:
		return true
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reasonName(pb.ErrorReason_ERROR_REASON_SESSION_BUSY) {
			return true
		}
	}
	return false
}

// claim returns the answer of requestID and whether this call is the first with it (it
// must run and settle it). The answer may be another method's or another request's.
func (a *answers) claim(requestID, method string, fp [sha256.Size]byte) (ans *answer, first bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire()
	if ans := a.byID[requestID]; ans != nil {
		return ans, false
	}
	ans = &answer{requestID: requestID, method: method, fingerprint: fp, done: make(chan struct{})}
	a.byID[requestID] = ans
	return ans, true
}

func (a *answers) settle(ans *answer, resp proto.Message, err error) {
	size := answerOverhead + len(ans.requestID)
	if resp != nil {
		size += proto.Size(resp)
	}
	if err != nil {
		size += len(err.Error())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ans.resp, ans.err, ans.size = resp, err, size
	ans.expires = a.now().Add(a.ttl)
	a.settled.PushBack(ans)
	a.bytes += size
	close(ans.done)
	a.expire()
}

func (a *answers) abandon(ans *answer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ans.abandoned = true
	delete(a.byID, ans.requestID)
	close(ans.done)
}

// expire drops the settled answers past their time, then the oldest while there are
// too many or they take too much; a.mu is held. Answers still running are never dropped:
// their number is bounded by the calls running.
func (a *answers) expire() {
	now := a.now()
	for e := a.settled.Front(); e != nil; e = a.settled.Front() {
		ans := e.Value.(*answer)
		if now.Before(ans.expires) && len(a.byID) <= a.maxEntries && a.bytes <= a.maxBytes {
			return
		}
		a.settled.Remove(e)
		a.bytes -= ans.size
		delete(a.byID, ans.requestID)
	}
}

// fingerprint identifies a request by its fields but the request_id: the same id with
// the same fingerprint is a repeat.
func fingerprint(req proto.Message) ([sha256.Size]byte, error) {
	m := proto.Clone(req)
	fd := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name("request_id"))
	if fd == nil {
		return [sha256.Size]byte{}, errors.New("the request has no request_id field")
	}
	m.ProtoReflect().Clear(fd)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}
