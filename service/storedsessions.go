package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// storedSnapshots describe sessions from what is stored alone, for those whose agent is
// no longer configured: the owner record, completed with the stored conversation (title,
// model, mode, usage, message count) where the agent kept one. Such a session is closed.
func (r *Registry) storedSnapshots(ctx context.Context, recs []store.SessionOwner) ([]presenters.SessionInfo, error) {
	ids := make([]string, len(recs))
	for i, rec := range recs {
		ids[i] = rec.SessionID
	}
	convs, err := r.store.GetConversations(ctx, ids)
	if err != nil {
		return nil, err
	}
	counts, err := r.store.CountMessagesOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]store.Conversation, len(convs))
	for _, c := range convs {
		byID[c.ID] = c
	}
	out := make([]presenters.SessionInfo, len(recs))
	for i, rec := range recs {
		info := storedSession(rec, presenters.SessionClosed, agentNotConfiguredReason(rec.AgentID))
		if c, ok := byID[rec.SessionID]; ok {
			info.Title, info.CurrentModelID, info.CurrentModeID = c.Title, c.ModelID, c.ModeID
			info.UpdatedAt, info.Usage = c.UpdatedAt, c.Usage
		}
		info.MessageCount = counts[rec.SessionID]
		out[i] = info
	}
	return out, nil
}

// storedMessages reads what q selects of a session's stored history, for a session
// whose agent is no longer configured: the same pages a live agent's history gives. A
// session the agent kept no history of has no messages (but a query bounded by a
// message still names one it does not hold).
func (r *Registry) storedMessages(ctx context.Context, sessionID string, q presenters.MessageQuery) ([]presenters.Message, error) {
	msgs, err := r.store.Messages(ctx, sessionID, q)
	// Without bounds, not found can only mean no stored conversation.
	if errors.Is(err, presenters.ErrNotFound) && q.AfterMessageID == "" && q.BeforeMessageID == "" {
		return nil, nil
	}
	return msgs, err
}

// storedSession is a session as its owner record has it, with the status given.
func storedSession(rec store.SessionOwner, status presenters.SessionStatus, reason string) presenters.SessionInfo {
	return presenters.SessionInfo{
		SessionID:    rec.SessionID,
		AgentID:      rec.AgentID,
		Workspace:    rec.Workspace,
		CreatedAt:    rec.CreatedAt(),
		Status:       status,
		StatusReason: reason,
	}
}

// sessionPageToken is where a ListSessions page continues, under the filters it was
// issued for. Tokens are opaque to clients: base64url of this as JSON.
type sessionPageToken struct {
	Kind    string `json:"k"`
	Updated int64  `json:"u"`
	Session string `json:"s"`
	Filters string `json:"f"`
}

const sessionPageTokenKind = "sessions"

func encodeSessionPageToken(at store.SessionCursor, filters string) string {
	raw, _ := json.Marshal(sessionPageToken{Kind: sessionPageTokenKind, Updated: at.UpdatedUnixNano, Session: at.SessionID, Filters: filters}) // cannot fail
	return base64.RawURLEncoding.EncodeToString(raw)
}

// decodeSessionPageToken returns where a page continues (nil without a token); filters
// is the request's fingerprint, which must be the token's.
func decodeSessionPageToken(token, filters string) (*store.SessionCursor, error) {
	if token == "" {
		return nil, nil
	}
	var t sessionPageToken
	if !decodeToken(token, &t) || t.Kind != sessionPageTokenKind || t.Session == "" {
		return nil, invalidArgument("page_token %q is not one ListSessions issued; pass next_page_token from the previous response unchanged, or leave it empty for the first page", token)
	}
	if t.Filters != filters {
		return nil, invalidArgument("page_token was issued for other filters (agent_id, workspace, statuses, updated_after); keep the filters while paging, or start again without page_token")
	}
	return &store.SessionCursor{UpdatedUnixNano: t.Updated, SessionID: t.Session}, nil
}
