package acpbridge

import (
	"context"
	"errors"
	"fmt"
	"strings"

	acp "github.com/coder/acp-go-sdk"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// JSON-RPC error codes ACP uses besides the standard ones.
const (
	codeAuthRequired     = -32000
	codeResourceNotFound = -32002
	codeInvalidParams    = -32602
	codeInternal         = -32603
)

var (
	// ErrLostConnection is a call or a turn that could not reach agenticd.
	ErrLostConnection = errors.New("lost the connection to agenticd")
	// errUnknownSession is a session this connection neither created nor loaded.
	errUnknownSession = errors.New("unknown session")
)

// reasonOf is the google.rpc.ErrorInfo reason agenticd put on an error, or "".
func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// reasonIs reports whether st carries reason r, which ErrorInfo spells without the
// ERROR_REASON_ prefix.
func reasonIs(st *status.Status, r pb.ErrorReason) bool {
	return reasonOf(st) == strings.TrimPrefix(r.String(), "ERROR_REASON_")
}

// turnEnded says whether a CancelMessage failed only because the turn had ended.
func turnEnded(err error) bool {
	st, ok := status.FromError(err)
	return ok && err != nil && reasonIs(st, pb.ErrorReason_ERROR_REASON_MESSAGE_NOT_RUNNING)
}

// requestError turns an error of agenticd's API into an ACP error a person can act on:
// agenticd's own message (it says what was wrong and what to do), under the JSON-RPC
// code that fits, with the reason and the gRPC code as data for programs.
func (b *bridge) requestError(err error) error {
	if err == nil {
		return nil
	}
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, context.Canceled) {
		return acp.NewRequestCancelled(nil)
	}
	st, ok := status.FromError(err)
	if !ok {
		return &acp.RequestError{Code: codeInternal, Message: err.Error()}
	}
	reason := reasonOf(st)
	data := map[string]any{"grpcCode": st.Code().String()}
	if reason != "" {
		data["reason"] = reason
	}
	msg := st.Message()
	code := codeInternal
	switch {
	case reasonIs(st, pb.ErrorReason_ERROR_REASON_AGENT_AUTH_REQUIRED):
		code = codeAuthRequired
		msg += fmt.Sprintf(" (agent %s logs in on agenticd's side: give it the credentials in agenticd's config, then try again)", b.opts.AgentID)
	case st.Code() == codes.NotFound:
		code = codeResourceNotFound
	case st.Code() == codes.InvalidArgument:
		code = codeInvalidParams
	case st.Code() == codes.Unavailable && reason == "":
		// No reason: the transport failed, agenticd did not answer.
		msg = fmt.Sprintf("%v at %s (%s): check that agenticd runs and is reachable; agenticctl reconnects by itself", ErrLostConnection, b.opts.Target, msg)
	case st.Code() == codes.DeadlineExceeded && reason == "":
		msg = fmt.Sprintf("agenticd at %s did not answer in time (%s): check that it runs and is reachable", b.opts.Target, msg)
	case st.Code() == codes.Unauthenticated:
		code = codeAuthRequired
	}
	return &acp.RequestError{Code: code, Message: msg, Data: data}
}
