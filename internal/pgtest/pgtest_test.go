package pgtest

import (
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = StopShared() }))
}

// A cluster runs as a user other than root, serves databases of their own on
// 127.0.0.1, and after Stop neither listens nor leaves its directory behind.
func TestClusterServesDatabasesAndStopsClean(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx)
	if err != nil {
		skipOrFail(t, err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	info, err := os.Stat(c.dataDir())
	if err != nil {
		t.Fatal(err)
	}
	if uid := info.Sys().(*syscall.Stat_t).Uid; uid == 0 {
		t.Errorf("the data directory belongs to root; the server must run as another user")
	}

	first, second := c.NewDatabase(t), c.NewDatabase(t)
	if first == second {
		t.Fatalf("two databases share the URL %s", first)
	}
	for _, dsn := range []string{c.DSN(Superuser), first, second} {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		var who, dbName string
		if err := db.QueryRowContext(ctx, `SELECT current_user, current_database()`).Scan(&who, &dbName); err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		_ = db.Close()
		if who != Superuser {
			t.Errorf("%s: connected as %q, want %q", dsn, who, Superuser)
		}
	}
	// A table made in one test database is not in the other.
	exec := func(dsn, q string) error {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		_, err = db.ExecContext(ctx, q)
		return err
	}
	if err := exec(first, `CREATE TABLE only_here (x int)`); err != nil {
		t.Fatal(err)
	}
	if err := exec(second, `SELECT * FROM only_here`); err == nil {
		t.Error("a table of one test database is seen from another")
	}

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port))
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("%s still accepts connections after Stop", addr)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory %s is still there after Stop (stat: %v)", c.dir, err)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "data", "postmaster.pid")); err == nil {
		t.Error("the server's pid file remains")
	}
}

// Shared starts one cluster for the package, whichever test asks first; its schemas
// keep their tables apart.
func TestSharedIsOneClusterOfSeparateSchemas(t *testing.T) {
	a, b := Shared(t), Shared(t)
	if a != b {
		t.Fatal("Shared started two clusters")
	}
	ctx := context.Background()
	open := func(dsn string) *sql.DB {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	first, second := open(a.NewSchema(t)), open(a.NewSchema(t))
	if _, err := first.ExecContext(ctx, `CREATE TABLE only_here (x int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := first.ExecContext(ctx, `SELECT * FROM only_here`); err != nil {
		t.Fatalf("a table is not seen from its own schema: %v", err)
	}
	if _, err := second.ExecContext(ctx, `SELECT * FROM only_here`); err == nil {
		t.Error("a table of one test schema is seen from another")
	}
}
