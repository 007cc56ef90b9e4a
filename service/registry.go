package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// Registry knows the agents (agent id -> presenter, fixed at start-up) and, through the
// store, which agent owns each session, and the stored history of sessions whose agent
// is no longer configured.
type Registry struct {
	store  *store.Store
	agents map[string]presenters.Presenter
	order  []presenters.Presenter // registration order, for ListAgents
}

// NewRegistry registers the presenters; two with the same agent id are a config error.
func NewRegistry(st *store.Store, ps []presenters.Presenter) (*Registry, error) {
	r := &Registry{store: st, agents: make(map[string]presenters.Presenter, len(ps))}
	for _, p := range ps {
		id := p.AgentID()
		if id == "" {
			return nil, fmt.Errorf("a presenter has an empty agent id; every agent needs an id like <type>.<provider>.<name>")
		}
		if _, dup := r.agents[id]; dup {
			return nil, fmt.Errorf("agent id %q is registered twice; give each agent in the config its own id", id)
		}
		r.agents[id] = p
		r.order = append(r.order, p)
	}
	return r, nil
}

// Presenters returns every registered presenter in registration order.
func (r *Registry) Presenters() []presenters.Presenter {
	return append([]presenters.Presenter(nil), r.order...)
}

// Agent returns the presenter of an agent id.
func (r *Registry) Agent(agentID string) (presenters.Presenter, error) {
	if p, ok := r.agents[agentID]; ok {
		return p, nil
	}
	return nil, &agentNotFoundError{AgentID: agentID, Configured: r.agentList()}
}

// agentNotFoundError: no agent with that id is configured (AGENT_NOT_FOUND, metadata
// agent_id). Configured lists the agents that are.
type agentNotFoundError struct{ AgentID, Configured string }

func (e *agentNotFoundError) Error() string {
	return fmt.Sprintf("%v: unknown agent %q; ListAgents shows the agents of this server (%s)", presenters.ErrNotFound, e.AgentID, e.Configured)
}

func (e *agentNotFoundError) Unwrap() error { return presenters.ErrNotFound }

func (r *Registry) agentList() string {
	if len(r.order) == 0 {
		return "none are configured"
	}
	ids := make([]string, len(r.order))
	for i, p := range r.order {
		ids[i] = p.AgentID()
	}
	return strings.Join(ids, ", ")
}

// recordSession remembers a new session's agent, creator, ACL and setup, so that they
// survive a restart. New reports whether the session was not recorded before: its
// creator and ACL are then the ones given.
func (r *Registry) recordSession(ctx context.Context, info presenters.SessionInfo, agentID, creator string, grants []store.SessionGrant, setup store.SessionSetup) (isNew bool, err error) {
	isNew, err = r.store.RecordSessionOwner(ctx, store.SessionOwner{
		SessionID:       info.SessionID,
		AgentID:         agentID,
		Workspace:       info.Workspace,
		CreatedUnixNano: info.CreatedAt.UnixNano(),
		Creator:         creator,
	})
	if err != nil {
		return false, err
	}
	if len(grants) > 0 {
		if err := r.store.SetSessionGrants(ctx, info.SessionID, grants); err != nil {
			return false, err
		}
	}
	return isNew, r.store.SaveSessionSetup(ctx, setup)
}

// OwnerOf returns the presenter of the agent that owns a stored session; an
// *agentNotConfiguredError when that agent is no longer configured.
func (r *Registry) OwnerOf(ctx context.Context, sessionID string) (presenters.Presenter, error) {
	rec, err := r.store.SessionOwner(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	p, ok := r.agents[rec.AgentID]
	if !ok {
		return nil, &agentNotConfiguredError{rec: rec}
	}
	return p, nil
}

// agentNotConfiguredError: a stored session's agent is not configured on this server. Its
// history stays readable from the store (GetSession, ListSessions, ListMessages, GetMessage); anything
// that needs the agent fails with FAILED_PRECONDITION.
type agentNotConfiguredError struct{ rec store.SessionOwner }

func (e *agentNotConfiguredError) Error() string {
	return fmt.Sprintf("session %q belongs to agent %q, which is not configured on this server: GetSession, ListMessages and GetMessage still show its history; to continue it, add the agent to the config's agents and restart",
		e.rec.SessionID, e.rec.AgentID)
}

func (e *agentNotConfiguredError) Unwrap() error { return presenters.ErrFailedPrecondition }

// agentNotConfiguredReason is the status_reason of such a session.
func agentNotConfiguredReason(agentID string) string {
	return fmt.Sprintf("agent %s is no longer configured on this server; the session's history stays readable", agentID)
}
