package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/internal/pgtest"
)

// The Postgres counter must count the transactions that write, one each however many
// rows they write, and not the ones that only read (its own reads included).
func TestXidCounterCountsWriteTransactions(t *testing.T) {
	ctx := context.Background()
	_, dsn := pgtest.StartForTest(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (id SERIAL PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	c, err := pinXids(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	const autocommits = 5
	for i := 0; i < autocommits; i++ {
		if _, err := db.Exec("INSERT INTO t (v) VALUES ('x')"); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := tx.Exec("INSERT INTO t (v) VALUES ('y')"); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if _, err := c.since(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.since()
	if err != nil {
		t.Fatal(err)
	}
	if want := autocommits + 1; got != want {
		t.Errorf("counted %d write transactions, want %d", got, want)
	}
}

func TestEnginePairRow(t *testing.T) {
	var p enginePair
	p.total = 2
	p.add(0, 100, nil)
	p.add(0, 300, nil)
	p.add(1, 50, nil)
	p.add(1, 0, errors.New("boom"))
	r := p.row("S", "fig", func(v float64) string { return fmt.Sprintf("%.0f/s", v) }, "n")
	if r.Value != "SQLite 200/s · Postgres 50/s" {
		t.Errorf("value %q", r.Value)
	}
	if r.Ratio != "Postgres 0.25 × SQLite (same runs)" {
		t.Errorf("ratio %q", r.Ratio)
	}
	if r.Runs != "SQLite 2/2, Postgres 1/2" || !strings.Contains(r.Notes, "failed runs: boom") {
		t.Errorf("runs %q notes %q", r.Runs, r.Notes)
	}
	var none enginePair
	none.total = 1
	none.add(0, 1, nil)
	none.add(1, 0, errors.New("postgres is not installed"))
	r = none.row("S", "fig", func(v float64) string { return fmt.Sprint(v) }, "")
	if !strings.Contains(r.Value, "Postgres not available: postgres is not installed") || r.Ratio != "" {
		t.Errorf("a missing engine: value %q ratio %q", r.Value, r.Ratio)
	}
}
