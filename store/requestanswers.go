package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// RequestAnswer is the first answer to a call that carried a request_id, kept so that a
// repeat gets it whichever process answers it (after a restart, or on another replica).
type RequestAnswer struct {
	RequestID string `gorm:"primaryKey"`
	// Method is the call's full gRPC method; Fingerprint identifies its request without
	// the request_id.
	Method      string `gorm:"not null"`
	Fingerprint []byte `gorm:"not null"`
	// Response holds the response's protobuf bytes, Status a google.rpc.Status's for an
	// error; one of them is set.
	Response []byte
	Status   []byte
	// ExpiresUnixNano is when the answer is no longer a repeat's.
	ExpiresUnixNano int64 `gorm:"not null;index:idx_request_answers_expires"`
}

// TableName is the table's name for GORM.
func (RequestAnswer) TableName() string { return "request_answers" }

// pruneAnswersEvery: expired answers are deleted by a save at most this often, so that a
// save is one insert almost always.
const pruneAnswersEvery = time.Minute

const (
	saveRequestAnswerSQL = `INSERT INTO request_answers (request_id, method, fingerprint, response, status, expires_unix_nano)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (request_id) DO UPDATE SET method = excluded.method, fingerprint = excluded.fingerprint,
			response = excluded.response, status = excluded.status, expires_unix_nano = excluded.expires_unix_nano
		WHERE request_answers.expires_unix_nano <= ?`
	lookupRequestAnswerSQL = `SELECT method, fingerprint, response, status, expires_unix_nano FROM request_answers
		WHERE request_id = ? AND expires_unix_nano > ?`
)

// SaveRequestAnswer keeps a's answer unless an unexpired one is already kept under its
// request id (the first answer stands); now and then it deletes the expired ones. The
// answer is one prepared statement, a transaction of its own: the work of the call it
// answers has been done and committed by then, whatever the answer.
func (s *Store) SaveRequestAnswer(ctx context.Context, a RequestAnswer, now time.Time) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if _, err := s.writeStmt(ctx, s.saveRequestAnswerStmt, a.RequestID, a.Method, a.Fingerprint, a.Response, a.Status, a.ExpiresUnixNano, now.UnixNano()); err != nil {
		return fmt.Errorf("keep the answer of request %s: %w", a.RequestID, err)
	}
	last := s.answersPruned.Load()
	if now.UnixNano()-last < int64(pruneAnswersEvery) || !s.answersPruned.CompareAndSwap(last, now.UnixNano()) {
		return nil
	}
	err = s.write(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`DELETE FROM request_answers WHERE expires_unix_nano <= ?`, now.UnixNano()).Error
	})
	if err != nil {
		return fmt.Errorf("delete the expired answers of requests: %w", err)
	}
	return nil
}

// LookupRequestAnswer returns the answer kept under requestID that has not expired at
// now; ok is false when there is none.
func (s *Store) LookupRequestAnswer(ctx context.Context, requestID string, now time.Time) (a RequestAnswer, ok bool, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	a.RequestID = requestID
	err = s.lookupRequestAnswerStmt.QueryRowContext(ctx, requestID, now.UnixNano()).Scan(&a.Method, &a.Fingerprint, &a.Response, &a.Status, &a.ExpiresUnixNano)
	if errors.Is(err, sql.ErrNoRows) {
		return RequestAnswer{}, false, nil
	}
	if err != nil {
		return RequestAnswer{}, false, fmt.Errorf("read the answer of request %s: %w", requestID, err)
	}
	return a, true, nil
}
