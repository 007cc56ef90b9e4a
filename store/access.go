package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// OwnerPrincipal is the principal of the default credentials: sessions stored before
// sessions had creators belong to it.
const OwnerPrincipal = "owner"

// SessionGrant is one entry of a session's ACL (besides its creator, who may do
// everything): a principal, or every member of a group, may read the session or also
// write to it.
type SessionGrant struct {
	SessionID string `gorm:"primaryKey"`
	// Grantee is GranteePrincipal(name) or GranteeGroup(name): one column, so that a
	// reader's grants are one IN list.
	Grantee string `gorm:"primaryKey;index:idx_session_grants_grantee"`
	Write   bool   `gorm:"not null"`
}

// TableName is the table's name for GORM.
func (SessionGrant) TableName() string { return "session_grants" }

// GranteePrincipal and GranteeGroup spell a grant's grantee.
func GranteePrincipal(name string) string { return "principal:" + name }
func GranteeGroup(name string) string     { return "group:" + name }

// Reader is who reads a list: a principal and its groups. Lists filtered on a reader
// hold the sessions it created and those shared with it or one of its groups.
type Reader struct {
	Principal string
	Groups    []string
}

func (r Reader) grantees() []string {
	out := []string{GranteePrincipal(r.Principal)}
	for _, g := range r.Groups {
		out = append(out, GranteeGroup(g))
	}
	return out
}

// readableBy is the condition that keeps a reader's sessions, on a column holding
// session ids, and its arguments.
func readableBy(column string, r Reader) (string, []any) {
	grantees := r.grantees()
	cond := column + ` IN (SELECT session_id FROM session_owners WHERE creator = ?
		UNION SELECT session_id FROM session_grants WHERE grantee IN (` + placeholders(len(grantees)) + `))`
	args := []any{r.Principal}
	for _, g := range grantees {
		args = append(args, g)
	}
	return cond, args
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

const sessionGrantsSQL = `SELECT grantee, write FROM session_grants WHERE session_id = ?`

// SessionGrants returns the ACLs of sessions, by session id, each in SortGrants' order.
// The ACL of one session, which a call's reach to it needs, is a prepared statement.
func (s *Store) SessionGrants(ctx context.Context, sessionIDs []string) (_ map[string][]SessionGrant, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	out := make(map[string][]SessionGrant)
	if len(sessionIDs) == 1 {
		err = s.sessionGrants(ctx, sessionIDs[0], out)
	} else {
		err = s.sessionGrantsOf(ctx, sessionIDs, out)
	}
	if err != nil {
		return nil, err
	}
	for _, gs := range out {
		SortGrants(gs)
	}
	return out, nil
}

func (s *Store) sessionGrantsOf(ctx context.Context, sessionIDs []string, out map[string][]SessionGrant) error {
	for part := range slices.Chunk(sessionIDs, idBatch) {
		var rows []SessionGrant
		if err := s.db.WithContext(ctx).Where("session_id IN ?", part).Find(&rows).Error; err != nil {
			return fmt.Errorf("read the ACLs of %d sessions: %w", len(part), err)
		}
		for _, g := range rows {
			out[g.SessionID] = append(out[g.SessionID], g)
		}
	}
	return nil
}

// SortGrants puts an ACL in the order every answer shows it: by grantee, byte by byte
// (not by the database's collation, which on Postgres usually is not bytewise).
func SortGrants(gs []SessionGrant) {
	slices.SortFunc(gs, func(a, b SessionGrant) int { return strings.Compare(a.Grantee, b.Grantee) })
}

func (s *Store) sessionGrants(ctx context.Context, sessionID string, out map[string][]SessionGrant) error {
	rows, err := s.sessionGrantsStmt.QueryContext(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("read the ACL of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	for rows.Next() {
		g := SessionGrant{SessionID: sessionID}
		if err := rows.Scan(&g.Grantee, &g.Write); err != nil {
			return fmt.Errorf("read the ACL of session %s: %w", sessionID, err)
		}
		out[sessionID] = append(out[sessionID], g)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the ACL of session %s: %w", sessionID, err)
	}
	return nil
}

// SetSessionGrants replaces a session's ACL; presenters.ErrNotFound when the session is
// unknown.
func (s *Store) SetSessionGrants(ctx context.Context, sessionID string, grants []SessionGrant) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	err = s.write(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&SessionOwner{}).Where("session_id = ?", sessionID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: unknown session %q; ListSessions shows the sessions this server knows", presenters.ErrNotFound, sessionID)
		}
		if err := tx.Where("session_id = ?", sessionID).Delete(&SessionGrant{}).Error; err != nil {
			return err
		}
		if len(grants) == 0 {
			return nil
		}
		for i := range grants {
			grants[i].SessionID = sessionID
		}
		return tx.Create(&grants).Error
	})
	if err != nil && !errors.Is(err, presenters.ErrNotFound) {
		return fmt.Errorf("share session %s: %w", sessionID, err)
	}
	return err
}

// CountSessions counts the sessions a reader may read; nil counts them all.
func (s *Store) CountSessions(ctx context.Context, r *Reader) (_ int64, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	q := s.db.WithContext(ctx).Model(&SessionOwner{})
	if r != nil {
		cond, args := readableBy("session_id", *r)
		q = q.Where(cond, args...)
	}
	var n int64
	if err := q.Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// SessionCreators returns the creators of sessions, by session id; unknown ids are
// left out.
func (s *Store) SessionCreators(ctx context.Context, sessionIDs []string) (_ map[string]string, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	out := make(map[string]string, len(sessionIDs))
	for part := range slices.Chunk(sessionIDs, idBatch) {
		var rows []SessionOwner
		if err := s.db.WithContext(ctx).Select("session_id", "creator").Where("session_id IN ?", part).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("read the creators of %d sessions: %w", len(part), err)
		}
		for _, r := range rows {
			out[r.SessionID] = r.Creator
		}
	}
	return out, nil
}
