package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// ErrConversationExists is returned by CreateConversation for an id already stored.
var ErrConversationExists = fmt.Errorf("conversation already exists: %w", presenters.ErrInvalidArgument)

// Conversation is one stored session.
type Conversation struct {
	ID      string
	AgentID string
	// AgentSessionID is the agent's own id for the session (ACP sessionId); empty is
	// taken as ID.
	AgentSessionID string
	Workspace      string
	Title          string
	ModelID        string
	ModeID         string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Closed         bool
	Usage          presenters.TokenUsage
}

const conversationColumns = `id, agent_id, agent_session_id, workspace, title, model_id, mode_id, created_at, updated_at, closed,
	usage_input_tokens, usage_output_tokens, usage_total_tokens, usage_cached_input_tokens,
	usage_reasoning_tokens, usage_context_used, usage_context_size, usage_cost, usage_cost_currency, usage_reported`

type conversationRow struct {
	ID                     string
	AgentID                string
	AgentSessionID         string
	Workspace              string
	Title                  string
	ModelID                string
	ModeID                 string
	CreatedAt              int64
	UpdatedAt              int64
	Closed                 bool
	UsageInputTokens       int64
	UsageOutputTokens      int64
	UsageTotalTokens       int64
	UsageCachedInputTokens int64
	UsageReasoningTokens   int64
	UsageContextUsed       int64
	UsageContextSize       int64
	UsageCost              float64
	UsageCostCurrency      string
	UsageReported          sql.NullInt64
}

func (r conversationRow) conversation() Conversation {
	agentSessionID := r.AgentSessionID
	if agentSessionID == "" {
		agentSessionID = r.ID
	}
	return Conversation{
		ID: r.ID, AgentID: r.AgentID, AgentSessionID: agentSessionID, Workspace: r.Workspace, Title: r.Title,
		ModelID: r.ModelID, ModeID: r.ModeID,
		CreatedAt: time.Unix(0, r.CreatedAt), UpdatedAt: time.Unix(0, r.UpdatedAt),
		Closed: r.Closed,
		Usage:  r.usage(),
	}
}

// CreateConversation stores a new conversation. Zero times are set to now.
// ErrConversationExists when the id is taken.
func (s *Store) CreateConversation(ctx context.Context, c Conversation) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if c.ID == "" || c.AgentID == "" {
		return fmt.Errorf("create conversation: id and agent id are required: %w", presenters.ErrInvalidArgument)
	}
	now := time.Now()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = c.CreatedAt
	}
	if c.AgentSessionID == "" {
		c.AgentSessionID = c.ID
	}
	args := append([]any{c.ID, c.AgentID, c.AgentSessionID, c.Workspace, c.Title, c.ModelID, c.ModeID,
		c.CreatedAt.UnixNano(), c.UpdatedAt.UnixNano(), c.Closed}, usageColumns(c.Usage)...)
	_, err = s.writeStmt(ctx, s.insertConversationStmt, args...)
	if isDuplicate(err) {
		return fmt.Errorf("conversation %s: %w", c.ID, ErrConversationExists)
	}
	if err != nil {
		return fmt.Errorf("create conversation %s: %w", c.ID, err)
	}
	return nil
}

// GetConversation returns one conversation; presenters.ErrNotFound if it is not stored.
func (s *Store) GetConversation(ctx context.Context, id string) (_ Conversation, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var rows []conversationRow
	err = s.db.WithContext(ctx).Raw(`SELECT `+conversationColumns+` FROM conversations WHERE id = ?`, id).
		Scan(&rows).Error
	if err != nil {
		return Conversation{}, fmt.Errorf("read conversation %s: %w", id, err)
	}
	if len(rows) == 0 {
		return Conversation{}, fmt.Errorf("session %s: %w", id, presenters.ErrNotFound)
	}
	return rows[0].conversation(), nil
}

// idBatch is how many ids one IN (...) query binds: far below SQLite's variable limit.
const idBatch = 500

// GetConversations returns the stored conversations among ids, in any order; an id not
// stored is left out. One query per 500 ids.
func (s *Store) GetConversations(ctx context.Context, ids []string) (_ []Conversation, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	out := make([]Conversation, 0, len(ids))
	for part := range slices.Chunk(ids, idBatch) {
		var rows []conversationRow
		err := s.db.WithContext(ctx).Raw(`SELECT `+conversationColumns+` FROM conversations WHERE id IN ?`, part).
			Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("read %d conversations: %w", len(part), err)
		}
		for _, r := range rows {
			out = append(out, r.conversation())
		}
	}
	return out, nil
}

// CountMessagesOf returns the number of stored messages of each of the sessions; one
// with none is absent from the map. One query per 500 ids.
func (s *Store) CountMessagesOf(ctx context.Context, sessionIDs []string) (_ map[string]int64, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	out := make(map[string]int64, len(sessionIDs))
	for part := range slices.Chunk(sessionIDs, idBatch) {
		var rows []messageCount
		err := s.db.WithContext(ctx).Raw(`SELECT conversation_id, COUNT(*) AS n FROM messages
			WHERE conversation_id IN ? GROUP BY conversation_id`, part).Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("count messages of %d sessions: %w", len(part), err)
		}
		for _, r := range rows {
			out[r.ConversationID] = r.N
		}
	}
	return out, nil
}

type messageCount struct {
	ConversationID string
	N              int64
}

// UpdateConversation writes every mutable field of c (all but ID, AgentID, CreatedAt).
// A zero UpdatedAt is set to now. presenters.ErrNotFound if it is not stored.
func (s *Store) UpdateConversation(ctx context.Context, c Conversation) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if s.fence != "" && s.dialect == postgresDialect {
		// A replica's: fenced like its message writes (a session it lost is not closed
		// or retitled under its new owner).
		err := s.write(ctx, func(tx *gorm.DB) error {
			if err := s.checkFenceOf(tx, []string{c.ID}); err != nil {
				return err
			}
			return updateConversation(tx, c)
		})
		if err != nil {
			return fmt.Errorf("update conversation %s: %w", c.ID, err)
		}
		return nil
	}
	res, err := s.writeStmt(ctx, s.updateConversationStmt, updateConversationArgs(c)...)
	var rows int64
	if err == nil {
		rows, err = res.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("update conversation %s: %w", c.ID, err)
	}
	return conversationUpdated(c.ID, rows, nil)
}

const (
	insertConversationSQL = `INSERT INTO conversations (` + conversationColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	updateConversationSQL = `UPDATE conversations SET agent_session_id = COALESCE(NULLIF(?, ''), id), workspace = ?, title = ?,
		model_id = ?, mode_id = ?, updated_at = ?, closed = ?, usage_input_tokens = ?, usage_output_tokens = ?,
		usage_total_tokens = ?, usage_cached_input_tokens = ?, usage_reasoning_tokens = ?,
		usage_context_used = ?, usage_context_size = ?, usage_cost = ?, usage_cost_currency = ?,
		usage_reported = ?
		WHERE id = ?`
)

// updateConversationArgs are updateConversationSQL's arguments; a zero UpdatedAt is now.
func updateConversationArgs(c Conversation) []any {
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = time.Now()
	}
	args := append([]any{c.AgentSessionID, c.Workspace, c.Title, c.ModelID, c.ModeID, c.UpdatedAt.UnixNano(), c.Closed},
		usageColumns(c.Usage)...)
	return append(args, c.ID)
}

// conversationUpdated is presenters.ErrNotFound when an update changed no row.
func conversationUpdated(id string, rows int64, err error) error {
	if err != nil {
		return err
	}
	if rows == 0 {
		return fmt.Errorf("session %s: %w", id, presenters.ErrNotFound)
	}
	return nil
}

func updateConversation(tx *gorm.DB, c Conversation) error {
	res := tx.Exec(updateConversationSQL, updateConversationArgs(c)...)
	return conversationUpdated(c.ID, res.RowsAffected, res.Error)
}
