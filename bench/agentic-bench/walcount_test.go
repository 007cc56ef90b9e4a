package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agenticd/agenticd/sandbox/confine"
)

func TestMain(m *testing.M) {
	confine.MaybeRunInit()
	goleak.VerifyTestMain(m)
}

// The counter must see exactly the write transactions another connection commits, also
// when that connection checkpoints in between, and must not count reads.
func TestWALCommitsCountsWriteTransactions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	writer, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	writer.SetMaxOpenConns(1)
	if _, err := writer.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	w, err := pinWAL(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	const autocommits, multiRow = 7, 3
	for i := 0; i < autocommits; i++ {
		if _, err := writer.Exec("INSERT INTO t (v) VALUES (?)", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := writer.Exec("PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < multiRow; i++ {
		tx, err := writer.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 50; j++ {
			if _, err := tx.Exec("INSERT INTO t (v) VALUES (?)", "many rows, one transaction"); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := writer.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	got, err := w.since()
	if err != nil {
		t.Fatal(err)
	}
	if got != autocommits+multiRow {
		t.Fatalf("counted %d write transactions, want %d", got, autocommits+multiRow)
	}
}

func TestChunkCheckFollowsSplitAndMergedDeltas(t *testing.T) {
	const size = 64
	var all string
	for i := 0; i < 5; i++ {
		all += fmt.Sprintf("%08d|%019d|", i, int64(1000+i)) + string(make([]byte, size-29))
	}
	c := newChunkCheck(size, 5)
	c.feed(all[:10], 2000)
	c.feed(all[10:200], 2001)
	c.feed(all[200:], 2002)
	if err := c.intact(); err != nil {
		t.Fatal(err)
	}
	if len(c.lat) != 5 || c.lat[0] != 1000 || c.lat[4] != 2002-1004 {
		t.Fatalf("latencies %v", c.lat)
	}
	bad := newChunkCheck(size, 5)
	bad.feed(all[:size], 1)
	bad.feed(all[2*size:3*size], 1)
	if bad.intact() == nil {
		t.Fatal("a missing chunk went unnoticed")
	}
}
