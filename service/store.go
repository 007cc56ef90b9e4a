package service

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/transcript"
)

// Store keeps what the service itself must remember across restarts, in the server's
// SQLite database: which agent owns each session, and the event sequence floor. It also
// reads the presenters' stored history, for sessions whose agent is no longer configured.
type Store struct {
	db *gorm.DB
	// history is the presenters' history store on the same database, read only here.
	history *transcript.Store
	// Prepared once: every CreateSession runs it, and preparing it each time (through GORM's
	// statement builder) cost more than running it. Closing the database closes it too.
	addSessionStmt *sql.Stmt
	// writeMu is the database's one write lock, shared with the presenters' history
	// stores (transcript.WriteLock): writers queue here instead of in SQLite's sleeping
	// busy handler.
	writeMu sync.Locker
}

var _ SequenceStore = (*Store)(nil)

// sessionOwner maps a session to the agent that owns it. Presenters keep the rest.
type sessionOwner struct {
	SessionID string `gorm:"primaryKey"`
	AgentID   string `gorm:"not null;index:idx_session_owners_agent,priority:1"`
	Workspace string `gorm:"not null"`
	// CreatedUnixNano orders ListSessions (newest first) and its page tokens.
	CreatedUnixNano int64 `gorm:"not null;index:idx_session_owners_created;index:idx_session_owners_agent,priority:2"`
}

func (sessionOwner) TableName() string { return "session_owners" }

// sequenceFloor is a single row: no event sequence ever issued exceeds Floor.
type sequenceFloor struct {
	ID    int `gorm:"primaryKey"`
	Floor uint64
}

func (sequenceFloor) TableName() string { return "event_sequence_floor" }

// NewStore creates the service's tables (and the history's) if needed. It reads no rows.
// Close releases its prepared statements.
func NewStore(ctx context.Context, db *gorm.DB) (*Store, error) {
	if err := db.WithContext(ctx).AutoMigrate(&sessionOwner{}, &sequenceFloor{}); err != nil {
		return nil, fmt.Errorf("create the service tables: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("service tables: %w", err)
	}
	stmt, err := sqlDB.PrepareContext(ctx, `INSERT INTO session_owners (session_id, agent_id, workspace, created_unix_nano)
		VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`)
	if err != nil {
		return nil, fmt.Errorf("service tables: prepare the session owner insert: %w", err)
	}
	history, err := transcript.New(ctx, db)
	if err != nil {
		_ = stmt.Close()
		return nil, err
	}
	return &Store{db: db, history: history, addSessionStmt: stmt, writeMu: transcript.WriteLock(db)}, nil
}

// Close releases the prepared statements. The store must not be used afterwards.
func (s *Store) Close() error {
	return errors.Join(s.addSessionStmt.Close(), s.history.Close())
}

// SequenceFloor returns the stored floor (0 on a new database).
func (s *Store) SequenceFloor(ctx context.Context) (uint64, error) {
	var row sequenceFloor
	err := s.db.WithContext(ctx).Take(&row, 1).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, nil
	}
	return row.Floor, err
}

// SetSequenceFloor raises the stored floor to floor; it never lowers it, so that writes
// landing out of order leave the highest.
func (s *Store) SetSequenceFloor(ctx context.Context, floor uint64) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "id"}},
		DoUpdates: clause.Set{{Column: clause.Column{Name: "floor"}, Value: gorm.Expr("MAX(floor, excluded.floor)")}},
	}).Create(&sequenceFloor{ID: 1, Floor: floor}).Error
}

// addSession records a new session's owner. A record of the same session by the same
// agent stays as it is; one by another agent is an error (session ids are one namespace
// across agents, and the first owner keeps its session).
func (s *Store) addSession(ctx context.Context, rec sessionOwner) error {
	s.writeMu.Lock()
	res, err := s.addSessionStmt.ExecContext(ctx, rec.SessionID, rec.AgentID, rec.Workspace, rec.CreatedUnixNano)
	s.writeMu.Unlock()
	var rows int64
	if err == nil {
		rows, err = res.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("record session %s: %w", rec.SessionID, err)
	}
	if rows == 1 {
		return nil
	}
	existing, err := s.sessionOwnerOf(ctx, rec.SessionID)
	if err != nil {
		return err
	}
	if existing.AgentID != rec.AgentID {
		return fmt.Errorf("%w: agent %s answered with session id %q, which already belongs to agent %s; session ids must be unique across agents, so the new session is closed (report it to the agent's maintainers)",
			presenters.ErrFailedPrecondition, rec.AgentID, rec.SessionID, existing.AgentID)
	}
	return nil
}

// sessionOwnerOf returns a session's record; presenters.ErrNotFound when unknown.
func (s *Store) sessionOwnerOf(ctx context.Context, sessionID string) (sessionOwner, error) {
	var rec sessionOwner
	err := s.db.WithContext(ctx).Where("session_id = ?", sessionID).Take(&rec).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return rec, fmt.Errorf("%w: unknown session %q; ListSessions shows the sessions this server knows", presenters.ErrNotFound, sessionID)
	}
	if err != nil {
		return rec, fmt.Errorf("look up session %s: %w", sessionID, err)
	}
	return rec, nil
}

// idBatch is how many ids one IN (...) query binds: far below SQLite's variable limit.
const idBatch = 500

// storedSessions returns which of the session ids the store knows.
func (s *Store) storedSessions(ctx context.Context, sessionIDs []string) (map[string]bool, error) {
	known := make(map[string]bool, len(sessionIDs))
	for part := range slices.Chunk(sessionIDs, idBatch) {
		var found []string
		if err := s.db.WithContext(ctx).Model(&sessionOwner{}).Where("session_id IN ?", part).Pluck("session_id", &found).Error; err != nil {
			return nil, fmt.Errorf("look up %d sessions: %w", len(part), err)
		}
		for _, id := range found {
			known[id] = true
		}
	}
	return known, nil
}

// storedSnapshots describe sessions from what is stored alone, for those whose agent is
// no longer configured: the owner record, completed with the stored conversation (title,
// model, mode, usage, message count) where the agent kept one. Such a session is closed.
func (s *Store) storedSnapshots(ctx context.Context, recs []sessionOwner) ([]presenters.SessionInfo, error) {
	ids := make([]string, len(recs))
	for i, rec := range recs {
		ids[i] = rec.SessionID
	}
	convs, err := s.history.GetConversations(ctx, ids)
	if err != nil {
		return nil, err
	}
	counts, err := s.history.CountMessagesOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]transcript.Conversation, len(convs))
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
func (s *Store) storedMessages(ctx context.Context, sessionID string, q presenters.MessageQuery) ([]presenters.Message, error) {
	msgs, err := s.history.Messages(ctx, sessionID, q)
	if errors.Is(err, presenters.ErrNotFound) && q.BeforeMessageID == "" {
		return nil, nil
	}
	return msgs, err
}

// storedSession is a session as its owner record has it, with the status given.
func storedSession(rec sessionOwner, status presenters.SessionStatus, reason string) presenters.SessionInfo {
	return presenters.SessionInfo{
		SessionID:    rec.SessionID,
		AgentID:      rec.AgentID,
		Workspace:    rec.Workspace,
		CreatedAt:    rec.createdAt(),
		Status:       status,
		StatusReason: reason,
	}
}

// sessionCursor is a position in the newest-first order of sessions.
type sessionCursor struct {
	CreatedUnixNano int64
	SessionID       string
}

// listSessions returns up to limit sessions, newest first, after the cursor (nil: from
// the newest), optionally of one agent.
func (s *Store) listSessions(ctx context.Context, agentID string, limit int, after *sessionCursor) ([]sessionOwner, error) {
	q := s.db.WithContext(ctx).Model(&sessionOwner{})
	if agentID != "" {
		q = q.Where("agent_id = ?", agentID)
	}
	if after != nil {
		q = q.Where("(created_unix_nano < ?) OR (created_unix_nano = ? AND session_id < ?)",
			after.CreatedUnixNano, after.CreatedUnixNano, after.SessionID)
	}
	var recs []sessionOwner
	if err := q.Order("created_unix_nano DESC, session_id DESC").Limit(limit).Find(&recs).Error; err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return recs, nil
}

// Page tokens are opaque to clients: base64url of "<created unix nano>/<session id>".
func encodePageToken(c sessionCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedUnixNano, 10) + "/" + c.SessionID))
}

func decodePageToken(token string) (*sessionCursor, error) {
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
	return &sessionCursor{CreatedUnixNano: n, SessionID: id}, nil
}

func (r sessionOwner) createdAt() time.Time { return time.Unix(0, r.CreatedUnixNano) }
