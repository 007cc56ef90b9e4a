package service

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

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

// storedMessages reads a session's messages from the stored history, for a session whose
// agent is no longer configured. A session the agent kept no history of has none.
func (r *Registry) storedMessages(ctx context.Context, sessionID string, q presenters.MessageQuery) ([]presenters.Message, error) {
	msgs, err := r.store.Messages(ctx, sessionID, q)
	if errors.Is(err, presenters.ErrNotFound) && q.BeforeMessageID == "" {
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

// Page tokens are opaque to clients: base64url of "<created unix nano>/<session id>".
func encodePageToken(c store.SessionCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedUnixNano, 10) + "/" + c.SessionID))
}

func decodePageToken(token string) (*store.SessionCursor, error) {
	if token == "" {
		return nil, nil
	}
	bad := invalidArgument("page_token %q is not one this server issued; pass next_page_token from the previous ListSessions response unchanged, or leave it empty for the first page", token)
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, bad
	}
	nanos, id, ok := strings.Cut(string(raw), "/")
	if !ok || id == "" {
		return nil, bad
	}
	n, err := strconv.ParseInt(nanos, 10, 64)
	if err != nil {
		return nil, bad
	}
	return &store.SessionCursor{CreatedUnixNano: n, SessionID: id}, nil
}
