package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
)

// ErrDamaged is the error of a history database that SQLite finds damaged.
var ErrDamaged = errors.New("the history database is damaged")

// IntegrityCheckBudget bounds CheckSQLite at start-up. The check reads every page: about
// 0.13 s for a database of 100,000 messages (220 MB) in the page cache, so about 0.6 s
// for 1 GB; a larger database, or one on a slow disk, is checked in part.
const IntegrityCheckBudget = time.Second

// maxReportedProblems is how many of SQLite's findings an error shows: the first few say
// what kind of damage it is.
const maxReportedProblems = 5

// Integrity is what CheckSQLite found in a database file it did not find damaged.
type Integrity struct {
	// Exists is false when there is no file yet: SQLite will create a new database.
	Exists bool
	// Size is the file's size in bytes.
	Size int64
	// Empty is a file of no bytes: SQLite takes it for a new database, though it may be
	// one whose contents were lost.
	Empty bool
	// Finished is false when the check did not read every page: it ran out of its budget,
	// or SQLite could not run it (Unchecked).
	Finished bool
	// Unchecked is why SQLite could not run the check, when it could not for a reason
	// other than damage (the file unreadable, say): opening it will then tell.
	Unchecked error
	// Elapsed is how long the check took.
	Elapsed time.Duration
}

// CheckSQLite checks the database file at path before OpenSQLite opens it for writing:
// it runs SQLite's quick_check (every page's structure, but not that indexes match their
// tables) on a read-only connection for at most budget. A damaged file is an error
// wrapping ErrDamaged that names the file, quotes SQLite and says what to do: agenticd
// writes every turn into this file, and writing into a damaged one can spread the
// damage to what is still intact. What the check does not reach (a budget run out, a
// file of no bytes, a check SQLite could not run) is reported in Integrity for the caller
// to log.
func CheckSQLite(ctx context.Context, path string, budget time.Duration) (Integrity, error) {
	var found Integrity
	abs, err := filepath.Abs(path)
	if err != nil {
		return found, fmt.Errorf("check history database %s: %w", path, err)
	}
	info, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return found, nil
	}
	if err != nil {
		return found, fmt.Errorf("check history database: %w", err)
	}
	if !info.Mode().IsRegular() {
		return found, fmt.Errorf("check history database %s: not a regular file; move it away, or choose another data_dir", abs)
	}
	found.Exists, found.Size = true, info.Size()
	if found.Size == 0 {
		// A database in WAL mode has its header written before anything goes to its log,
		// so a log beside an empty file is what remains of a database that lost its
		// contents. SQLite would delete that log on opening the file, read-only or not.
		if wal, err := os.Stat(abs + "-wal"); err == nil && wal.Size() > 0 {
			return found, damaged(abs, fmt.Sprintf("the file is empty, yet its write-ahead log %s-wal holds %d bytes", filepath.Base(abs), wal.Size()))
		}
		found.Empty = true
		return found, nil
	}

	start := time.Now()
	problems, err := quickCheck(ctx, abs, budget)
	found.Elapsed = time.Since(start)
	switch {
	case err == nil && len(problems) == 1 && problems[0] == "ok":
		found.Finished = true
		return found, nil
	case err == nil:
		return found, damaged(abs, sqliteSays(problems))
	case ctx.Err() != nil:
		return found, fmt.Errorf("check history database %s: %w", abs, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded) || isSQLiteCode(err, sqlite3.ErrInterrupt):
		return found, nil // out of budget: Finished is false
	case isSQLiteCode(err, sqlite3.ErrCorrupt) || isSQLiteCode(err, sqlite3.ErrNotADB):
		return found, damaged(abs, sqliteSays([]string{err.Error()}))
	default:
		found.Unchecked = err
		return found, nil
	}
}

// quickCheck runs PRAGMA quick_check on a read-only connection of its own, which writes
// nothing into the database or its log, whatever it finds.
func quickCheck(ctx context.Context, path string, budget time.Duration) ([]string, error) {
	dsn := (&url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro"}).String()
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	// One more finding than is shown, to know there are more.
	rows, err := db.QueryContext(ctx, fmt.Sprintf("PRAGMA quick_check(%d)", maxReportedProblems+1))
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		problems = append(problems, line)
	}
	return problems, rows.Err()
}

func isSQLiteCode(err error, code sqlite3.ErrNo) bool {
	var sqliteErr sqlite3.Error
	return errors.As(err, &sqliteErr) && sqliteErr.Code == code
}

// damaged is the error of a damaged database: which file, what is wrong with it, what to
// do.
func damaged(path, wrong string) error {
	name := filepath.Base(path)
	return fmt.Errorf("%w: %s; %s. agenticd does not write into a damaged database. "+
		"Either restore %s from a backup, or move it away to start with an empty history; "+
		"either way move %s-wal and %s-shm away with it, if they exist, or SQLite will apply them to the new file "+
		"(`sqlite3 %s .recover | sqlite3 recovered.db` may save what is still readable from the moved file)",
		ErrDamaged, path, wrong, name, name, name, name)
}

// sqliteSays quotes the first of SQLite's findings.
func sqliteSays(problems []string) string {
	var said []string
	for _, row := range problems {
		for line := range strings.Lines(row) { // a row may hold several findings
			line = strings.TrimSpace(line)
			if line != "" && line != "*** in database main ***" { // a heading, not a finding
				said = append(said, line)
			}
		}
	}
	more := ""
	if len(said) > maxReportedProblems {
		said, more = said[:maxReportedProblems], " (and more)"
	}
	return "SQLite says: " + strings.Join(said, "; ") + more
}
