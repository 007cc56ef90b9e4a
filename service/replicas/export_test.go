package replicas

import (
	"context"

	"github.com/agenticd/agenticd/store"
)

// The routing, opened to the external tests, which run it on the service's own hub and
// registry (the service imports this package, so only an external test can import it).
const (
	CallRead = callRead
	CallLoad = callLoad
	CallLive = callLive
)

func (r *Replica) Route(ctx context.Context, sessionID string, kind sessionCall) (*store.Lease, error) {
	return r.route(ctx, sessionID, kind)
}

func (r *Replica) Ran(ctx context.Context, method, sessionID string) { r.ran(ctx, method, sessionID) }

// Disown forgets that this replica holds the session, as if the call that took it had not
// run.
func (r *Replica) Disown(sessionID string) {
	r.mu.Lock()
	delete(r.owned, sessionID)
	r.mu.Unlock()
}
