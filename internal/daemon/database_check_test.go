package daemon

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agenticd/agenticd/store"
)

// syncBuffer is a log destination the server's goroutines may write to while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startAndStop runs agenticd once on cfg, leaving its database as a stopped agenticd does.
func startAndStop(t *testing.T, cfg Config) {
	t.Helper()
	srv, err := Start(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A database with a damaged page in a table start-up does not read is refused at start,
// naming the file and what to do, rather than served from and written into.
func TestStartRefusesADamagedDatabase(t *testing.T) {
	defer func(budget time.Duration) { integrityCheckBudget = budget }(integrityCheckBudget)
	integrityCheckBudget = time.Minute
	cfg := testConfig(t)
	startAndStop(t, cfg)
	path := filepath.Join(cfg.DataDir, DatabaseFile)

	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	// Every page in the file itself, none left in the WAL: the damage below must be what
	// the next start reads, not a page the WAL still holds a good copy of.
	var page, pageSize int64
	_, err = db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	if err == nil {
		err = db.QueryRow("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'blocks'").Scan(&page)
	}
	if err == nil {
		err = db.QueryRow("PRAGMA page_size").Scan(&pageSize)
	}
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Garbage over the middle of the page, its header among it: one bad sector.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(bytes.Repeat([]byte{0xa5}, 512), (page-1)*pageSize)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatal(err)
	}

	srv, err := Start(context.Background(), cfg, quiet)
	if err == nil {
		_ = srv.Stop(context.Background())
		t.Fatal("agenticd started on a damaged database")
	}
	if !errors.Is(err, store.ErrDamaged) {
		t.Errorf("%v, want ErrDamaged", err)
	}
	for _, want := range []string{path, "SQLite says", "restore agenticd.db from a backup", "move it away"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// An empty file where the database should be starts an empty history, with a warning
// naming the file; a sound database starts without one.
func TestStartWarnsOfAnEmptyDatabaseFile(t *testing.T) {
	cfg := testConfig(t)
	path := filepath.Join(cfg.DataDir, DatabaseFile)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, want := range []bool{true, false} {
		var log syncBuffer
		srv, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(&log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		warned := strings.Contains(log.String(), "level=WARN msg=\"the history database was an empty file") &&
			strings.Contains(log.String(), "file="+path)
		if warned != want {
			t.Errorf("warned of an empty file: %v, want %v; log:\n%s", warned, want, log.String())
		}
	}
}
