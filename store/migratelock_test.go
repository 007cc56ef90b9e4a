package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/internal/pgtest"
)

// openPostgresDB opens a connection pool of its own on dsn, closed when t ends.
func openPostgresDB(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sqlDB, _ := db.DB()
		_ = sqlDB.Close()
	})
	return db
}

// appliedVersions are the rows of transcript_schema_migrations, by version.
func appliedVersions(t *testing.T, db *gorm.DB) []int {
	t.Helper()
	var versions []int
	if err := db.Raw(`SELECT version FROM transcript_schema_migrations ORDER BY version`).Scan(&versions).Error; err != nil {
		t.Fatal(err)
	}
	return versions
}

// Several agenticd starting at once on one Postgres database migrate it one at a time:
// while one holds the migration lock the others wait, then find the schema current, and
// every migration is applied once.
func TestPostgresMigrationsRunOneAtATime(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewSchema(t)

	// Held by someone else, the lock keeps migrate from touching the schema.
	holder := openPostgresDB(t, dsn)
	sqlHolder, err := holder.DB()
	if err != nil {
		t.Fatal(err)
	}
	held, err := sqlHolder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	if _, err := held.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLockKey); err != nil {
		t.Fatal(err)
	}
	waiting := openPostgresDB(t, dsn)
	done := make(chan error, 1)
	go func() { done <- migrate(ctx, waiting) }()
	// Postgres shows the waiting migrate as an advisory lock not granted: wait for that.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("migrate returned (%v) while another agenticd held the migration lock", err)
		default:
		}
		var waiters int
		// A bigint advisory lock's key is (classid << 32) | objid, with objsubid 1.
		if err := holder.Raw(`SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
			AND ((classid::bigint << 32) | objid::bigint) = ? AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
			int64(migrationLockKey)).Scan(&waiters).Error; err != nil {
			t.Fatal(err)
		}
		if waiters > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("migrate neither waited for the migration lock nor returned")
		}
	}
	var tables int
	if err := holder.Raw(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&tables).Error; err != nil || tables != 0 {
		t.Fatalf("%d tables (%v) made while the lock was held elsewhere", tables, err)
	}

	// Released, the waiting migrate goes on, and more start beside it.
	const others = 3
	start := make(chan struct{})
	errs := make(chan error, others)
	var wg sync.WaitGroup
	for range others {
		db := openPostgresDB(t, dsn)
		wg.Go(func() {
			<-start
			errs <- migrate(ctx, db)
		})
	}
	if _, err := held.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, migrationLockKey); err != nil {
		t.Fatal(err)
	}
	close(start)
	wg.Wait()
	close(errs)
	if err := <-done; err != nil {
		t.Errorf("the migrate that waited: %v", err)
	}
	for err := range errs {
		if err != nil {
			t.Errorf("a migrate started beside it: %v", err)
		}
	}
	versions := appliedVersions(t, holder)
	if len(versions) != len(migrations) || versions[0] != 1 || versions[len(versions)-1] != len(migrations) {
		t.Fatalf("applied versions %v; want 1 to %d, once each", versions, len(migrations))
	}
	// No one keeps the lock: it is free again.
	var free bool
	if err := held.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, migrationLockKey).Scan(&free); err != nil || !free {
		t.Fatalf("migration lock free = %v, %v after every migrate returned", free, err)
	}
	if _, err := held.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, migrationLockKey); err != nil {
		t.Fatal(err)
	}
}

// Migrations started at the same moment on one fresh Postgres schema all succeed, and
// between them apply each migration once.
func TestPostgresMigratesStartedAtOnce(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewSchema(t)
	const stores = 4
	dbs := make([]*gorm.DB, stores)
	for i := range dbs {
		dbs[i] = openPostgresDB(t, dsn)
	}
	start := make(chan struct{})
	errs := make(chan error, stores)
	var wg sync.WaitGroup
	for _, db := range dbs {
		wg.Go(func() {
			<-start
			errs <- migrate(ctx, db)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("migrate: %v", err)
		}
	}
	if versions := appliedVersions(t, dbs[0]); len(versions) != len(migrations) {
		t.Fatalf("applied versions %v; want 1 to %d, once each", versions, len(migrations))
	}
}
