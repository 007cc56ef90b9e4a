package service

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters/textutil"
	"github.com/agenticd/agenticd/service/wire"
	"github.com/agenticd/agenticd/store"
)

// Retries: a client-chosen request_id makes a mutating call safe to repeat. The answer
// (response or error) of the first call with an id is remembered for requestIDTTL, in
// memory and, with an AnswerStore, in the database; a repeat within that time gets it
// instead of doing the work again: while the first call still runs (it waits for it), and
// after a restart or on another replica (from the database).
const (
	// requestIDTTL is how long an answer is remembered (ServerLimits.request_id_ttl).
	requestIDTTL = 10 * time.Minute
	// uuidLen is a request_id's length: a UUID in its usual 8-4-4-4-12 form.
	uuidLen = 36
	// maxRequestIDBytes bounds how much of a refused request_id an error shows.
	maxRequestIDBytes = 64
	// maxRememberedAnswers and maxRememberedBytes bound what the answers take, whatever
	// clients send: past either, the oldest answers are forgotten before their time (a
	// repeat of a forgotten one does the work again, as a call without request_id would).
	maxRememberedAnswers = 10_000
	maxRememberedBytes   = 32 << 20
	// answerOverhead is what one remembered answer costs beyond its response's and
	// error's bytes: the map entry, the list element, the fingerprint.
	answerOverhead = 256
)

// AnswerStore keeps answers where every process on the database finds them
// (*store.Store).
type AnswerStore interface {
	SaveRequestAnswer(ctx context.Context, a store.RequestAnswer, now time.Time) error
	LookupRequestAnswer(ctx context.Context, requestID string, now time.Time) (store.RequestAnswer, bool, error)
}

// answerStoreTimeout bounds a lookup or save of a kept answer: a stalled database makes
// a repeat do the work again rather than hang.
const answerStoreTimeout = 5 * time.Second

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
	kept       AnswerStore // nil: memory only
	logger     *slog.Logger
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

func newAnswers(kept AnswerStore, logger *slog.Logger, ttl time.Duration, maxEntries, maxBytes int, now func() time.Time) *answers {
	return &answers{kept: kept, logger: logger, ttl: ttl, maxEntries: maxEntries, maxBytes: maxBytes, now: now,
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
	if _, err := uuid.Parse(requestID); err != nil || len(requestID) != uuidLen {
		return nil, ic.refuse(ctx, method, invalidField("request_id", "request_id %q is not a UUID (like 0b7c7f4e-3f1a-4c2e-9d8b-5a6f7e8d9c0b): send a fresh UUID for every new request",
			textutil.Prefix(requestID, maxRequestIDBytes)))
	}
	fp, err := fingerprint(msg)
	if err != nil {
		return nil, ic.refuse(ctx, method, fmt.Errorf("fingerprint a %s request: %w", method, err))
	}
	// A request id is the caller's own: another principal's repeat is another request,
	// in memory and among the kept answers. The id, a UUID, has a fixed length, so the
	// key is unambiguous (and free of NUL, which Postgres text refuses).
	key := callerOf(ctx).Name + " " + requestID
	for {
		ans, first := ic.answers.claim(key, method, fp)
		if ans.method != method || ans.fingerprint != fp {
			return nil, ic.refuse(ctx, method, requestIDReused(requestID, ans.method))
		}
		if first {
			return ic.answers.run(ctx, ans, info.FullMethod, req, next)
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
func (a *answers) run(ctx context.Context, ans *answer, fullMethod string, req any, next grpc.UnaryHandler) (resp any, err error) {
	settled := false
	defer func() {
		if !settled {
			a.abandon(ans)
		}
	}()
	if m, kerr, found, reused := a.recall(ctx, ans, fullMethod); reused != nil {
		return nil, failWith(ctx, a.logger, path.Base(fullMethod), reused)
	} else if found {
		a.settle(ans, m, kerr)
		settled = true
		if kerr != nil {
			return nil, kerr
		}
		return proto.Clone(m), nil
	}
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
	a.keep(ctx, ans, fullMethod, m, err)
	return resp, err
}

// recall looks the request id up among the kept answers, for a first call in this
// process: found, it is the answer (m or kerr); reused is the error for an id kept with
// another request. A store that cannot answer lets the call do the work, with a warning.
func (a *answers) recall(ctx context.Context, ans *answer, fullMethod string) (m proto.Message, kerr error, found bool, reused error) {
	if a.kept == nil {
		return nil, nil, false, nil
	}
	lctx, cancel := context.WithTimeout(ctx, answerStoreTimeout)
	defer cancel()
	kept, ok, err := a.kept.LookupRequestAnswer(lctx, ans.requestID, a.now())
	if err != nil {
		a.logger.Warn("could not look a request_id up among the kept answers; the call runs", "request_id", ans.requestID, "err", err)
		return nil, nil, false, nil
	}
	if !ok {
		return nil, nil, false, nil
	}
	if kept.Method != fullMethod || !bytes.Equal(kept.Fingerprint, ans.fingerprint[:]) {
		return nil, nil, false, requestIDReused(ans.requestID, path.Base(kept.Method))
	}
	if kept.Status != nil {
		var st spb.Status
		if err := proto.Unmarshal(kept.Status, &st); err != nil {
			a.logger.Warn("a kept answer's error does not decode; the call runs", "request_id", ans.requestID, "err", err)
			return nil, nil, false, nil
		}
		return nil, status.FromProto(&st).Err(), true, nil
	}
	m, err = wire.NewResponse(fullMethod)
	if err == nil {
		err = proto.Unmarshal(kept.Response, m)
	}
	if err != nil {
		a.logger.Warn("a kept answer's response does not decode; the call runs", "request_id", ans.requestID, "err", err)
		return nil, nil, false, nil
	}
	return m, nil, true, nil
}

// keep stores a settled answer for repeats that reach another process. It runs on after
// the caller left: the work was done. A failure is logged: a repeat elsewhere then does
// the work again, as it would without the store.
func (a *answers) keep(ctx context.Context, ans *answer, fullMethod string, m proto.Message, callErr error) {
	if a.kept == nil {
		return
	}
	row := store.RequestAnswer{RequestID: ans.requestID, Method: fullMethod, Fingerprint: ans.fingerprint[:],
		ExpiresUnixNano: a.now().Add(a.ttl).UnixNano()}
	var err error
	if callErr != nil {
		row.Status, err = proto.Marshal(status.Convert(callErr).Proto())
	} else {
		row.Response, err = proto.Marshal(m)
	}
	if err == nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerStoreTimeout)
		defer cancel()
		err = a.kept.SaveRequestAnswer(sctx, row, a.now())
	}
	if err != nil {
		a.logger.Warn("could not keep a request's answer in the database; a repeat on another process does the work again", "request_id", ans.requestID, "err", err)
	}
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
