package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agenticd/agenticd/presenters"
)

// The registry's tables: which agent owns each session (and which principal created it,
// with its ACL: access.go), and the event sequence floor.
// They are GORM models created with AutoMigrate (migrate, under its lock), beside the history's migrated
// tables.

// SessionOwner maps a session to the agent that owns it. Presenters keep the rest.
type SessionOwner struct {
	SessionID string `gorm:"primaryKey"`
	AgentID   string `gorm:"not null;index:idx_session_owners_agent,priority:1"`
	Workspace string `gorm:"not null"`
	// CreatedUnixNano is when the session was created.
	CreatedUnixNano int64 `gorm:"not null;index:idx_session_owners_created;index:idx_session_owners_agent,priority:2"`
	// Creator is the principal that created the session: it owns it (OwnerPrincipal for
	// sessions stored before there were principals).
	Creator string `gorm:"not null;default:owner;index:idx_session_owners_creator"`
}

// TableName is the table's name for GORM.
func (SessionOwner) TableName() string { return "session_owners" }

// CreatedAt is when the session was created.
func (r SessionOwner) CreatedAt() time.Time { return time.Unix(0, r.CreatedUnixNano) }

// sequenceFloor is a single row: no event sequence ever issued exceeds Floor.
type sequenceFloor struct {
	ID    int `gorm:"primaryKey"`
	Floor uint64
}

func (sequenceFloor) TableName() string { return "event_sequence_floor" }

const insertSessionOwnerSQL = `INSERT INTO session_owners (session_id, agent_id, workspace, created_unix_nano, creator)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

// SequenceFloor returns the stored floor (0 on a new database).
func (s *Store) SequenceFloor(ctx context.Context) (_ uint64, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var row sequenceFloor
	err = s.db.WithContext(ctx).Take(&row, 1).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, nil
	}
	return row.Floor, err
}

// SetSequenceFloor raises the stored floor to floor; it never lowers it, so that writes
// landing out of order leave the highest.
func (s *Store) SetSequenceFloor(ctx context.Context, floor uint64) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	unlock, err := s.lockWrite(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "id"}},
		DoUpdates: clause.Set{{Column: clause.Column{Name: "floor"},
			Value: gorm.Expr(s.dialect.greatest() + "(event_sequence_floor.floor, excluded.floor)")}},
	}).Create(&sequenceFloor{ID: 1, Floor: floor}).Error
}

// AddSessionOwner records a new session's owner. A record of the same session by the
// same agent stays as it is; one by another agent is an error wrapping
// presenters.ErrFailedPrecondition (session ids are one namespace across agents, and the
// first owner keeps its session).
func (s *Store) AddSessionOwner(ctx context.Context, rec SessionOwner) error {
	_, err := s.RecordSessionOwner(ctx, rec)
	return err
}

// RecordSessionOwner is AddSessionOwner, and reports whether the record is new: then the
// session's creator is rec's (OwnerPrincipal when rec names none) and it has no ACL
// yet, so a caller need not read them back.
func (s *Store) RecordSessionOwner(ctx context.Context, rec SessionOwner) (inserted bool, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if rec.Creator == "" {
		rec.Creator = OwnerPrincipal
	}
	res, err := s.writeStmt(ctx, s.insertSessionOwnerStmt, rec.SessionID, rec.AgentID, rec.Workspace, rec.CreatedUnixNano, rec.Creator)
	var rows int64
	if err == nil {
		rows, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("record session %s: %w", rec.SessionID, err)
	}
	if rows == 1 {
		return true, nil
	}
	existing, err := s.SessionOwner(ctx, rec.SessionID)
	if err != nil {
		return false, err
	}
	if existing.AgentID != rec.AgentID {
		return false, fmt.Errorf("%w: agent %s answered with session id %q, which already belongs to agent %s; session ids must be unique across agents, so the new session is closed (report it to the agent's maintainers)",
			presenters.ErrFailedPrecondition, rec.AgentID, rec.SessionID, existing.AgentID)
	}
	return false, nil
}

const sessionOwnerSQL = `SELECT session_id, agent_id, workspace, created_unix_nano, creator FROM session_owners WHERE session_id = ?`

// SessionOwner returns a session's owner record; presenters.ErrNotFound when unknown.
// Calls on a session read it (its agent, and its creator for a caller's reach), so it is
// a prepared statement.
func (s *Store) SessionOwner(ctx context.Context, sessionID string) (_ SessionOwner, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var rec SessionOwner
	err = s.sessionOwnerStmt.QueryRowContext(ctx, sessionID).Scan(&rec.SessionID, &rec.AgentID, &rec.Workspace, &rec.CreatedUnixNano, &rec.Creator)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, fmt.Errorf("%w: unknown session %q; ListSessions shows the sessions this server knows", presenters.ErrNotFound, sessionID)
	}
	if err != nil {
		return rec, fmt.Errorf("look up session %s: %w", sessionID, err)
	}
	return rec, nil
}

// KnownSessions returns which of the session ids have an owner record. One query per
// 500 ids.
func (s *Store) KnownSessions(ctx context.Context, sessionIDs []string) (_ map[string]bool, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	known := make(map[string]bool, len(sessionIDs))
	for part := range slices.Chunk(sessionIDs, idBatch) {
		var found []string
		if err := s.db.WithContext(ctx).Model(&SessionOwner{}).Where("session_id IN ?", part).Pluck("session_id", &found).Error; err != nil {
			return nil, fmt.Errorf("look up %d sessions: %w", len(part), err)
		}
		for _, id := range found {
			known[id] = true
		}
	}
	return known, nil
}

// SessionFilter narrows ListSessions to what the store holds of a session; zero fields
// do not filter.
type SessionFilter struct {
	AgentID   string
	Workspace string
	// UpdatedAfter keeps sessions updated strictly after it (Unix nanoseconds; 0: all).
	UpdatedAfter int64
	// Reader keeps the sessions it may read; nil: all.
	Reader *Reader
}

// ListedSession is an owner record with the session's stored update time: the stored
// conversation's, or its creation when the agent stored none.
type ListedSession struct {
	SessionOwner
	UpdatedUnixNano int64
}

// Cursor is the position of the listed session in ListSessions' order.
func (l ListedSession) Cursor() SessionCursor {
	return SessionCursor{UpdatedUnixNano: l.UpdatedUnixNano, SessionID: l.SessionID}
}

// SessionCursor is a position in ListSessions' order.
type SessionCursor struct {
	UpdatedUnixNano int64
	SessionID       string
}

// listedUpdatedAt is a listed session's update time in ListSessions' query, spelled out
// where it filters: Postgres, unlike SQLite, takes no output column's name in WHERE.
const listedUpdatedAt = `COALESCE(c.updated_at, o.created_unix_nano)`

// ListSessions returns up to limit sessions that pass the filter, most recently updated
// first (ties by session id, ascending), after the cursor (nil: from the start). A
// session updated between two calls moves to the front, so a walk through the pages
// may miss or repeat it; UpdatedAfter catches up with what changed.
func (s *Store) ListSessions(ctx context.Context, f SessionFilter, limit int, after *SessionCursor) (_ []ListedSession, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	var where []string
	var args []any
	if f.AgentID != "" {
		where = append(where, "o.agent_id = ?")
		args = append(args, f.AgentID)
	}
	if f.Workspace != "" {
		where = append(where, "o.workspace = ?")
		args = append(args, f.Workspace)
	}
	if f.UpdatedAfter != 0 {
		where = append(where, listedUpdatedAt+" > ?")
		args = append(args, f.UpdatedAfter)
	}
	if f.Reader != nil {
		cond, readerArgs := readableBy("o.session_id", *f.Reader)
		where = append(where, cond)
		args = append(args, readerArgs...)
	}
	if after != nil {
		where = append(where, "("+listedUpdatedAt+" < ? OR ("+listedUpdatedAt+" = ? AND o.session_id > ?))")
		args = append(args, after.UpdatedUnixNano, after.UpdatedUnixNano, after.SessionID)
	}
	cond := ""
	if len(where) > 0 {
		cond = "WHERE " + strings.Join(where, " AND ")
	}
	// Sessions created before their conversation was stored, or by an agent that keeps
	// none, have no conversation row: their creation stands for their update.
	query := `SELECT o.session_id, o.agent_id, o.workspace, o.created_unix_nano, o.creator,
			` + listedUpdatedAt + ` AS updated_unix_nano
		FROM session_owners AS o LEFT JOIN conversations AS c ON c.id = o.session_id
		` + cond + `
		ORDER BY updated_unix_nano DESC, o.session_id ASC LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.WithContext(ctx).Raw(query, args...).Rows()
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []ListedSession
	for rows.Next() {
		var l ListedSession
		if err := rows.Scan(&l.SessionID, &l.AgentID, &l.Workspace, &l.CreatedUnixNano, &l.Creator, &l.UpdatedUnixNano); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}
