package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	_ "github.com/mattn/go-sqlite3" // the same SQLite driver agenticd uses
)

// walCommits counts the write transactions another process commits to a SQLite
// database in WAL mode, from outside that process, by reading its -wal file.
//
// Every committed write transaction appends its pages to the WAL; the last frame of a
// transaction carries the database size in its header ("commit frame"), the others 0.
// So between two reads of the file, the number of new commit frames is the number of
// write transactions committed (a transaction that changed no page writes nothing and
// costs no WAL append or sync, and is not counted).
//
// A checkpoint may rewind the WAL and overwrite old frames. To prevent that while
// counting, walCommits holds a read transaction open on the database: SQLite neither
// backfills past a reader's snapshot nor rewinds the WAL while a reader uses it. The
// salts in the WAL header change on every rewind, so a rewind would be detected.
type walCommits struct {
	walPath string
	db      *sql.DB
	conn    *sql.Conn
	start   walState
}

type walState struct {
	salt1, salt2 uint32
	commits      int
}

// pinWAL opens dbPath, pins its WAL with a read transaction and records the count.
func pinWAL(ctx context.Context, dbPath string) (*walCommits, error) {
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_busy_timeout=10000")
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	w := &walCommits{walPath: dbPath + "-wal", db: db, conn: conn}
	var n int
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		w.close()
		return nil, err
	}
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		w.close()
		return nil, fmt.Errorf("pin the WAL with a read transaction: %w", err)
	}
	if w.start, err = readWAL(w.walPath); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// since returns the write transactions committed since pinWAL.
func (w *walCommits) since() (int, error) {
	now, err := readWAL(w.walPath)
	if err != nil {
		return 0, err
	}
	if now.salt1 != w.start.salt1 || now.salt2 != w.start.salt2 {
		return 0, errors.New("the WAL was rewound during the measurement (its salts changed); commits cannot be counted")
	}
	return now.commits - w.start.commits, nil
}

func (w *walCommits) close() {
	_, _ = w.conn.ExecContext(context.Background(), "ROLLBACK")
	w.conn.Close()
	w.db.Close()
}

// readWAL parses the WAL header and counts the valid commit frames.
func readWAL(path string) (walState, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return walState{}, fmt.Errorf("read the WAL: %w", err)
	}
	if len(b) == 0 {
		return walState{}, nil // no write since the last rewind
	}
	if len(b) < 32 {
		return walState{}, fmt.Errorf("WAL %s: short header", path)
	}
	be := binary.BigEndian
	if magic := be.Uint32(b[0:]); magic != 0x377f0682 && magic != 0x377f0683 {
		return walState{}, fmt.Errorf("WAL %s: bad magic %#x", path, magic)
	}
	pageSize := int(be.Uint32(b[8:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	st := walState{salt1: be.Uint32(b[16:]), salt2: be.Uint32(b[20:])}
	for off := 32; off+24+pageSize <= len(b); off += 24 + pageSize {
		h := b[off : off+24]
		if be.Uint32(h[8:]) != st.salt1 || be.Uint32(h[12:]) != st.salt2 {
			break // a frame left from before the last rewind: the valid log ends here
		}
		if be.Uint32(h[4:]) != 0 {
			st.commits++
		}
	}
	return st, nil
}
