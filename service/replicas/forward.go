package replicas

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agenticd/agenticd/service/wire"
	"github.com/agenticd/agenticd/store"
)

// ForwardedHeader marks a forwarded call with the replica that forwarded it; a call is
// forwarded at most once, so two replicas that disagree on an owner cannot bounce it
// between them.
const ForwardedHeader = "agenticd-forwarded"

// forward runs the call on the replica holding the session's lease, with the caller's
// metadata (its token included), and returns that replica's answer as it is; down says
// the owner could not be reached. Its own failures are errors, not statuses.
func (r *Replica) forward(ctx context.Context, owner store.Lease, method string, req any) (resp any, down bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(ForwardedHeader)) > 0 {
		return nil, false, &OwnerUnavailableError{Owner: owner,
			Err: fmt.Errorf("session %s moved between replicas while its call was forwarded", owner.SessionID)}
	}
	if owner.Address == r.address {
		// A lease a dead process at this address left (this one restarted): it runs out
		// by its time.
		return nil, true, &OwnerUnavailableError{Owner: owner,
			Err: fmt.Errorf("the lease is held by %s, a former process at this address", owner.Replica)}
	}
	// The caller's credentials, trace context and agenticd's own headers: not the
	// transport's (an HTTP/1.1 client's Connection header makes grpc-go refuse the call).
	out := metadata.MD{}
	for k, v := range md {
		if k == "authorization" || k == "traceparent" || k == "tracestate" || k == "baggage" || strings.HasPrefix(k, "agenticd-") {
			out[k] = v
		}
	}
	// This replica has checked the caller's credentials, which another replica may not
	// know (its local token, the local socket, a web session): the call goes on with the
	// token they all accept.
	if r.token != "" {
		out.Set("authorization", "Bearer "+r.token)
	}
	out.Set(ForwardedHeader, r.id)
	// The owner trusts this beside the shared token alone (authenticator.authenticate);
	// whatever the caller sent under this name is replaced.
	out.Set(r.principals.Header(ctx))
	answer, err := wire.NewResponse(method)
	if err != nil {
		return nil, false, err
	}
	conn, err := r.conn(owner.Address)
	if err == nil {
		err = conn.Invoke(metadata.NewOutgoingContext(ctx, out), method, req, answer)
	}
	if err == nil {
		return answer, false, nil
	}
	if st, ok := status.FromError(err); ok && len(st.Details()) > 0 {
		return nil, false, err // the owner's own answer
	}
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	if conn != nil {
		// Replicas come and go at new addresses: one that does not answer is not kept.
		r.dropConn(owner.Address, conn)
	}
	return nil, true, &OwnerUnavailableError{Owner: owner, Err: errors.New(status.Convert(err).Message())}
}

// OwnerUnavailableError: the replica that holds a session's lease does not answer, or
// may still renew it; any replica takes the session over once the lease has run out, so
// the caller retries then.
type OwnerUnavailableError struct {
	Owner store.Lease
	Err   error // why the call cannot go to the owner
}

func (e *OwnerUnavailableError) Error() string {
	return fmt.Sprintf("the replica that owns session %s (%s) does not answer (%v); its lease ends by %s, then any replica takes the session over: retry",
		e.Owner.SessionID, e.Owner.Address, e.Err, e.Owner.Expires.UTC().Format(time.RFC3339Nano))
}

// conn is the client connection to another replica, made once per address.
func (r *Replica) conn(address string) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.conns[address]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connect to replica %s: %w", address, err)
	}
	r.conns[address] = c
	return c, nil
}

// dropConn closes the connection to address, unless another call has replaced it.
func (r *Replica) dropConn(address string, c *grpc.ClientConn) {
	r.mu.Lock()
	if r.conns[address] == c {
		delete(r.conns, address)
	}
	r.mu.Unlock()
	_ = c.Close()
}
