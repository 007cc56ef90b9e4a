package service

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
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
// SQLite database: which agent owns each session, and the event sequence floor.
type Store struct {
	db *gorm.DB
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

// NewStore creates the service's tables if needed. It reads no rows. Close releases its
// prepared statement.
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
	return &Store{db: db, addSessionStmt: stmt, writeMu: transcript.WriteLock(db)}, nil
}

// Close releases the prepared statement. The store must not be used afterwards.
func (s *Store) Close() error {
	return s.addSessionStmt.Close()
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
