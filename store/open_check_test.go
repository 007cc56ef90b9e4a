package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// writeHistory stores conversations×100 messages of about 1.5 KB each.
func writeHistory(t testing.TB, db *gorm.DB, conversations int) {
	t.Helper()
	s, err := New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	text := strings.Repeat("A reply with some code in it: `x := f(y)`.\n", 35)
	n := 0
	for c := range conversations {
		id := fmt.Sprintf("conv-%d", c)
		mustCreate(t, s, id, "deepchat.default")
		msgs := make([]presenters.Message, 0, 100)
		for range 100 {
			n++
			msgs = append(msgs, presenters.Message{ID: fmt.Sprintf("m%d", n), SessionID: id, Role: presenters.RoleAssistant,
				Status: presenters.MessageComplete, Blocks: []presenters.Block{{Type: presenters.BlockText, Text: text}}})
		}
		if err := s.SaveMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
}

// historyFile writes a real history database of 300 messages (about 170 pages) and
// closes it, as a stopped agenticd leaves it.
func historyFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agenticd.db")
	db, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	writeHistory(t, db, 3)
	sqlDB, _ := db.DB()
	if err := sqlDB.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// crashImage is what a crash leaves: the database and its write-ahead log holding commits
// not yet copied into it, with no shared-memory file.
func crashImage(t *testing.T) string {
	t.Helper()
	live := filepath.Join(t.TempDir(), "agenticd.db")
	db := openDB(t, live)
	writeHistory(t, db, 3)
	path := filepath.Join(t.TempDir(), "agenticd.db")
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(live + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if suffix == "-wal" && len(data) == 0 {
			t.Fatal("the write-ahead log is empty: the image would not be a crash's")
		}
		if err := os.WriteFile(path+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// files reads the database and whatever -wal and -shm files it has.
func files(t *testing.T, path string) map[string][]byte {
	t.Helper()
	found := map[string][]byte{}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if data, err := os.ReadFile(path + suffix); err == nil {
			found[suffix] = data
		}
	}
	return found
}

func checkUnchanged(t *testing.T, name, path string, before map[string][]byte) {
	t.Helper()
	after := files(t, path)
	for suffix, data := range before {
		if !bytes.Equal(after[suffix], data) {
			t.Errorf("%s: the check changed %s", name, filepath.Base(path+suffix))
		}
	}
	// A read-only connection may leave the shared-memory index and an empty log, as a
	// writer would create them anyway.
	for suffix, data := range after {
		if _, ok := before[suffix]; !ok && suffix != "-shm" && len(data) > 0 {
			t.Errorf("%s: the check left %s of %d bytes behind", name, filepath.Base(path+suffix), len(data))
		}
	}
}

func TestCheckSQLitePassesSoundDatabases(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "agenticd.db")
	if found, err := CheckSQLite(ctx, missing, time.Minute); err != nil || found.Exists {
		t.Errorf("no file yet: %+v, %v", found, err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("checking a missing database created it")
	}
	for name, path := range map[string]string{
		"a closed database":       historyFile(t),
		"a database a crash left": crashImage(t),
	} {
		before := files(t, path)
		found, err := CheckSQLite(ctx, path, time.Minute)
		if err != nil || !found.Exists || !found.Finished || found.Empty || found.Unchecked != nil || found.Elapsed <= 0 {
			t.Errorf("%s: %+v, %v; want it checked whole and sound", name, found, err)
		}
		checkUnchanged(t, name, path, before)
	}
}

// A file of no bytes is what SQLite takes for a new database; the check says it is empty
// (the caller warns: it may be a history whose contents were lost) and leaves it be.
func TestCheckSQLiteReportsAnEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agenticd.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	found, err := CheckSQLite(context.Background(), path, time.Minute)
	if err != nil || !found.Exists || !found.Empty {
		t.Errorf("an empty file: %+v, %v; want Empty", found, err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != 0 {
		t.Errorf("the check wrote into the empty file: %v, %v", info, err)
	}
}

// Damage SQLite can see refuses the database: the error names the file, quotes SQLite and
// says what to do, and the check writes nothing into the damaged file.
func TestCheckSQLiteRefusesDamagedDatabases(t *testing.T) {
	damage := map[string]struct {
		harm func(t *testing.T, path string)
		says string
	}{
		"truncated to 3 pages": {func(t *testing.T, path string) {
			if err := os.Truncate(path, 3*pageSize(t, path)); err != nil {
				t.Fatal(err)
			}
		}, "malformed"},
		"child page numbers overwritten in the middle of an interior page": {func(t *testing.T, path string) {
			page := rootPage(t, path, "messages")
			start, end := cellArea(t, path, page, 0x05)
			overwrite(t, path, page, (start+end)/2-16, bytes.Repeat([]byte{0xff}, 32))
		}, "invalid page number"},
		"cell pointers overwritten in a leaf page": {func(t *testing.T, path string) {
			leaf := firstChild(t, path, rootPage(t, path, "messages"))
			cellArea(t, path, leaf, 0x0d) // a table leaf
			overwrite(t, path, leaf, 8+8, bytes.Repeat([]byte{0xff}, 16))
		}, "out of range"},
		"garbage header": {func(t *testing.T, path string) {
			overwrite(t, path, 1, 0, bytes.Repeat([]byte("garbage!"), 12))
		}, "file is not a database"},
		// SQLite would delete the log, the one place the history may still be.
		"emptied, with its log left": {func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}, "the file is empty, yet its write-ahead log agenticd.db-wal holds"},
	}
	for name, d := range damage {
		path := historyFile(t)
		if strings.HasPrefix(name, "emptied") {
			path = crashImage(t)
		}
		d.harm(t, path)
		before := files(t, path)
		_, err := CheckSQLite(context.Background(), path, time.Minute)
		if !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: %v, want ErrDamaged", name, err)
			continue
		}
		for _, want := range []string{path, d.says, "restore agenticd.db from a backup", "move it away", "agenticd.db-wal", ".recover"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", name, err, want)
			}
		}
		checkUnchanged(t, name, path, before)
	}
}

// A check out of budget stops without a verdict: Finished is false, and nothing is wrong.
func TestCheckSQLiteStopsAtItsBudget(t *testing.T) {
	path := historyFile(t)
	found, err := CheckSQLite(context.Background(), path, time.Nanosecond)
	if err != nil || !found.Exists || found.Finished || found.Unchecked != nil {
		t.Errorf("out of budget: %+v, %v; want an unfinished check and no error", found, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CheckSQLite(ctx, path, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled start-up: %v, want context.Canceled", err)
	}
}

// BenchmarkCheckSQLite100kMessages times the start-up check of a history of 100,000
// messages (about 220 MB; building it takes about 10 s), and checks that a budget
// stops the check mid-way.
func BenchmarkCheckSQLite100kMessages(b *testing.B) {
	path := filepath.Join(b.TempDir(), "agenticd.db")
	db, err := OpenSQLite(path)
	if err != nil {
		b.Fatal(err)
	}
	writeHistory(b, db, 1000)
	sqlDB, _ := db.DB()
	if err := sqlDB.Close(); err != nil {
		b.Fatal(err)
	}
	var found Integrity
	for b.Loop() {
		if found, err = CheckSQLite(context.Background(), path, time.Minute); err != nil || !found.Finished {
			b.Fatalf("%+v, %v", found, err)
		}
	}
	b.ReportMetric(float64(found.Size)/1e6, "MB")
	// A budget shorter than the check stops it mid-way.
	if found, err = CheckSQLite(context.Background(), path, 20*time.Millisecond); err != nil || found.Finished {
		b.Errorf("with a budget of 20ms: %+v, %v; want an unfinished check", found, err)
	}
}

// pageSize reads the database's page size from its header.
func pageSize(t *testing.T, path string) int64 {
	t.Helper()
	header := make([]byte, 100)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.ReadAt(header, 0); err != nil {
		t.Fatal(err)
	}
	if size := binary.BigEndian.Uint16(header[16:18]); size != 1 {
		return int64(size)
	}
	return 65536
}

// rootPage is the number of a table's root page.
func rootPage(t *testing.T, path, table string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var page int64
	if err := db.QueryRow("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(&page); err != nil {
		t.Fatal(err)
	}
	return page
}

// readPage reads one page; its b-tree header starts at 100 on page 1, else at 0.
func readPage(t *testing.T, path string, page int64) (data []byte, headerAt int) {
	t.Helper()
	size := pageSize(t, path)
	data = make([]byte, size)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.ReadAt(data, (page-1)*size); err != nil {
		t.Fatal(err)
	}
	if page == 1 {
		headerAt = 100
	}
	return data, headerAt
}

// cellArea is where a b-tree page's cells lie, checking that the page is of the kind
// the damage is meant for (0x05 a table's interior page, 0x0d a table's leaf).
func cellArea(t *testing.T, path string, page int64, kind byte) (start, end int64) {
	t.Helper()
	data, at := readPage(t, path, page)
	if data[at] != kind {
		t.Fatalf("page %d is of kind %#x, not %#x: the test database no longer has the shape this damage needs", page, data[at], kind)
	}
	return int64(binary.BigEndian.Uint16(data[at+5 : at+7])), int64(len(data))
}

// firstChild is the page the first cell of an interior page points to.
func firstChild(t *testing.T, path string, page int64) int64 {
	t.Helper()
	data, at := readPage(t, path, page)
	cell := binary.BigEndian.Uint16(data[at+12 : at+14])
	return int64(binary.BigEndian.Uint32(data[cell : cell+4]))
}

// overwrite writes data at offset within a page.
func overwrite(t *testing.T, path string, page, offset int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteAt(data, (page-1)*pageSize(t, path)+offset); err != nil {
		t.Fatal(err)
	}
}
