package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"
)

// dialect is the SQL engine under a store: SQLite (the default) or Postgres. The SQL is
// written once, in SQLite's words where the two differ only in spelling; the few places
// that differ ask the dialect.
type dialect int

const (
	sqliteDialect dialect = iota
	postgresDialect
)

func dialectOf(db *gorm.DB) dialect {
	if db.Dialector.Name() == "postgres" {
		return postgresDialect
	}
	return sqliteDialect
}

// rebind turns the ? placeholders of q into Postgres's $1, $2, ... for statements that go
// through database/sql directly (GORM's Raw and Exec rebind their own). SQLite's SQL is
// returned as it is. The statements have no ? inside quotes.
func (d dialect) rebind(q string) string {
	if d != postgresDialect || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + strings.Count(q, "?")*3)
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// greatest is the function that returns the larger of its arguments: SQLite's
// two-argument MAX is an aggregate in Postgres.
func (d dialect) greatest() string {
	if d == postgresDialect {
		return "GREATEST"
	}
	return "MAX"
}

// noLimit is the LIMIT argument that selects every row.
func (d dialect) noLimit() any {
	if d == postgresDialect {
		return nil // LIMIT NULL; Postgres refuses a negative limit
	}
	return -1
}

// Postgres error codes the store tells apart (SQLSTATE).
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
)

// isDuplicate reports whether err is a primary key or unique constraint violation. A nil
// err is tested first: errors.As would allocate its target, on every write.
func isDuplicate(err error) bool {
	return err != nil && (isConstraint(err, sqlite3.ErrConstraintPrimaryKey) || isConstraint(err, sqlite3.ErrConstraintUnique) ||
		isPostgresCode(err, pgUniqueViolation))
}

// isMissingReference reports whether err is a foreign key violation.
func isMissingReference(err error) bool {
	return err != nil && (isConstraint(err, sqlite3.ErrConstraintForeignKey) || isPostgresCode(err, pgForeignKeyViolation))
}

func isConstraint(err error, code sqlite3.ErrNoExtended) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.ExtendedCode == code
}

func isPostgresCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// ErrUnavailable marks an error of a call the database could not serve for now: it is
// away, restarting, read-only, or a statement or lock waited past its bound. Trying the
// call again later may succeed. IsUnavailable also recognizes such errors unmarked.
var ErrUnavailable = errors.New("the database is unavailable")

// IsUnavailable reports whether err is one the database may not give again later: a
// lost, refused or timed out connection, a server shutting down or starting, a read-only
// database, a statement, lock or idle transaction timed out, a serialization failure or
// deadlock. A nil err is not, nor is the end of a caller's own context.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "57P"),      // admin shutdown, crash shutdown, cannot connect now
			pe.Code == "53300",                     // too many connections
			pe.Code == "25006",                     // read-only transaction
			pe.Code == "57014",                     // statement timeout (query cancelled)
			pe.Code == "55P03",                     // lock not available (lock_timeout)
			pe.Code == "25P03",                     // idle in transaction timeout
			pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock
			return true
		}
		return false
	}
	var ne *net.OpError // not net.Error, which a bare context deadline is too
	if errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err)
}
