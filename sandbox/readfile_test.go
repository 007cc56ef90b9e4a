package sandbox

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadFile(t *testing.T) {
	tr := newTree(t, Options{MaxReadBytes: 32})
	tr.plant(t)
	ws := tr.wsDir
	binary := "\x89PNG\r\n\x1a\n\x00\xff\xfe"
	mustWrite(t, ws+"/pic.png", binary)
	mustWrite(t, ws+"/exact.bin", strings.Repeat("x", 16))
	mustWrite(t, ws+"/over.bin", strings.Repeat("x", 17))
	mustWrite(t, ws+"/over-default.bin", strings.Repeat("x", 33))

	tests := []struct {
		name string
		path string
		max  int64
		want string
		err  error
	}{
		{"binary bytes as they are", "pic.png", 16, binary, nil},
		{"exactly the cap", "exact.bin", 16, strings.Repeat("x", 16), nil},
		{"through a symlink inside", "link-in/inner.txt", 16, "inner\n", nil},
		{"no cap given: the workspace read cap", "exact.bin", 0, strings.Repeat("x", 16), nil},

		{"over the cap", "over.bin", 16, "", ErrTooLarge},
		{"over the workspace read cap", "over-default.bin", 0, "", ErrTooLarge},
		{"missing", "missing.png", 16, "", ErrNotFound},
		{"directory", "dir", 16, "", ErrInvalidPath},
		{"FIFO", "fifo", 16, "", ErrInvalidPath},
		{"symlink out", "secret-link", 1 << 10, "", ErrOutsideWorkspace},
		{"dotdot out", "../../outside/secret.txt", 1 << 10, "", ErrOutsideWorkspace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tr.ws.ReadFile(tt.path, tt.max)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ReadFile(%q) = %q, %v; want %v", tt.path, got, err, tt.err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, []byte(tt.want)) {
				t.Fatalf("ReadFile(%q, %d) = %q, %v; want %q", tt.path, tt.max, got, err, tt.want)
			}
		})
	}
	_, err := tr.ws.ReadFile("over.bin", 16)
	if err == nil || !strings.Contains(err.Error(), "over.bin") || !strings.Contains(err.Error(), "16-byte") {
		t.Fatalf("too-large error %q should name the file and the cap", err)
	}
}

// A FIFO swapped in between resolving the path and opening it must be refused, not
// waited on: opening a FIFO for reading blocks until someone opens it for writing.
func TestReadFileFIFOSwapRace(t *testing.T) {
	tr := newTree(t, Options{})
	ws := tr.wsDir
	mustWrite(t, ws+"/pic.png", "image bytes")
	if err := syscall.Mkfifo(ws+"/pipe", 0o644); err != nil {
		t.Fatal(err)
	}
	exchange := func() error {
		return unix.Renameat2(unix.AT_FDCWD, ws+"/pic.png", unix.AT_FDCWD, ws+"/pipe", unix.RENAME_EXCHANGE)
	}
	if err := exchange(); err != nil {
		t.Skipf("atomic exchange unsupported here: %v", err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := exchange(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	stopReads := make(chan struct{})
	readsDone := make(chan struct{})
	wg.Go(func() {
		defer close(readsDone)
		for range 3000 {
			select {
			case <-stopReads:
				return
			default:
			}
			data, err := tr.ws.ReadFile("pic.png", 1<<10)
			if err == nil && string(data) != "image bytes" {
				t.Errorf("read %q", data)
			}
		}
	})
	select {
	case <-readsDone:
	case <-time.After(time.Minute): // a hang detector, not a speed limit: the reads take milliseconds
		t.Error("ReadFile blocked on a FIFO swapped in after the path was resolved")
		close(stopReads)
		// Give the blocked open a writer, so that it returns and the goroutine ends.
		for ended := false; !ended; {
			for _, name := range []string{"pic.png", "pipe"} {
				if f, err := os.OpenFile(ws+"/"+name, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			}
			select {
			case <-readsDone:
				ended = true
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	close(stop)
	wg.Wait()
}
