package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Errors of a database that is away for now are told from errors a retry cannot mend,
// and from a caller's own deadline.
func TestIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&pgconn.PgError{Code: "57P01"}, true}, // admin shutdown: a restart
		{&pgconn.PgError{Code: "25006"}, true}, // read-only transaction
		{&pgconn.PgError{Code: "55P03"}, true}, // lock_timeout
		{&pgconn.PgError{Code: "08006"}, true}, // connection failure
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "42P01"}, false},
		{&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, true},
		{fmt.Errorf("renew: %w", ErrUnavailable), true},
		{context.DeadlineExceeded, false},
		{context.Canceled, false},
		{errors.New("disk on fire"), false},
	} {
		if got := IsUnavailable(fmt.Errorf("wrapped: %w", tc.err)); tc.err != nil && got != tc.want {
			t.Errorf("IsUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if IsUnavailable(nil) {
		t.Error("IsUnavailable(nil)")
	}
}
