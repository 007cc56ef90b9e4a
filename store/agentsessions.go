package store

import (
	"context"
	"fmt"
	"slices"
)

// KnownAgentSessions reports which of agentSessionIDs, the agent's own session ids, have
// a stored conversation of the agent: the set of those that do. It reads conversations,
// not owners, because a presenter stores a session's conversation before the service
// records its owner, so a session being created is known here first. One query per 500
// ids.
func (s *Store) KnownAgentSessions(ctx context.Context, agentID string, agentSessionIDs []string) (_ map[string]bool, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	known := make(map[string]bool)
	for part := range slices.Chunk(agentSessionIDs, idBatch) {
		var ids []string
		err := s.db.WithContext(ctx).Raw(`SELECT DISTINCT agent_session_id FROM conversations
			WHERE agent_id = ? AND agent_session_id IN ?`, agentID, part).Scan(&ids).Error
		if err != nil {
			return nil, fmt.Errorf("read the stored sessions of agent %s: %w", agentID, err)
		}
		for _, id := range ids {
			known[id] = true
		}
	}
	return known, nil
}
