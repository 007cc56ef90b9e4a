package acp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func updateLine(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, i) + "\n"
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// readAvailable reads once with a large buffer: the flow reader returns what it can
// hand over without waiting.
func readAvailable(t *testing.T, r *flowReader) string {
	t.Helper()
	buf := make([]byte, 1<<20)
	n, err := r.Read(buf)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return string(buf[:n])
}

func TestFlowReaderHoldsBackNotificationsAtHighWater(t *testing.T) {
	var src strings.Builder
	for i := range 10 {
		src.WriteString(updateLine(i))
	}
	r := newFlowReader(strings.NewReader(src.String()), 4, discardLog())

	got := readAvailable(t, r)
	if want := updateLine(0) + updateLine(1) + updateLine(2) + updateLine(3); got != want {
		t.Fatalf("first read handed %q, want the first 4 lines", got)
	}
	if h, f, _ := r.stats(); h != 4 || f != 0 {
		t.Fatalf("handed=%d finished=%d, want 4, 0", h, f)
	}
	r.notificationDone()
	if got := readAvailable(t, r); got != updateLine(4) {
		t.Fatalf("after one finished, read %q, want exactly line 4", got)
	}
	for range 4 { // lines 1-4 finished: nothing in flight
		r.notificationDone()
	}
	if got := readAvailable(t, r); got != updateLine(5)+updateLine(6)+updateLine(7)+updateLine(8) {
		t.Fatalf("read %q, want lines 5-8", got)
	}
	if _, _, max := r.stats(); max != 4 {
		t.Fatalf("max in flight %d, want 4", max)
	}
}

func TestFlowReaderPassesRequestsAndResponsesUncounted(t *testing.T) {
	response := `{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}` + "\n"
	request := `{"jsonrpc":"2.0","id":"a","method":"session/request_permission","params":{}}` + "\n"
	cancel := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}` + "\n"
	src := updateLine(0) + response + request + cancel + updateLine(1)
	r := newFlowReader(strings.NewReader(src), 1, discardLog())

	if got := readAvailable(t, r); got != updateLine(0)+response+request+cancel {
		t.Fatalf("read %q, want the notification, then the uncounted lines, holding back the second notification", got)
	}
	r.notificationDone()
	if got := readAvailable(t, r); got != updateLine(1) {
		t.Fatalf("read %q, want the second notification", got)
	}
	if h, _, _ := r.stats(); h != 2 {
		t.Fatalf("handed %d counted lines, want 2", h)
	}
}

func TestFlowReaderDropsWhatTheSDKWouldRejectWithoutCounting(t *testing.T) {
	bad := []string{
		"not json at all\n",
		`{"jsonrpc":"2.0","method":"_vendor/notice","params":{}}` + "\n",
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":5,"update":{}}}` + "\n",
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":7}}}` + "\n",
		"\n",
	}
	src := strings.Join(bad, "") + updateLine(1)
	r := newFlowReader(strings.NewReader(src), 8, discardLog())
	if got := readAvailable(t, r); got != updateLine(1) {
		t.Fatalf("read %q, want only the valid update", got)
	}
	if h, _, _ := r.stats(); h != 1 {
		t.Fatalf("handed %d, want 1: dropped lines must not count (a count that never finishes would stall the agent)", h)
	}
}

func TestFlowReaderServesLongLinesInPieces(t *testing.T) {
	long := fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}`, strings.Repeat("y", 200_000)) + "\n"
	r := newFlowReader(strings.NewReader(long+updateLine(2)), 8, discardLog())
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for out.Len() < len(long)+len(updateLine(2)) {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		out.Write(buf[:n])
	}
	if out.String() != long+updateLine(2) {
		t.Fatal("long line not passed through intact")
	}
}

// A reader blocked at the high-water mark resumes as notifications finish and ends
// when closed; every line reaches the consumer once, in order.
func TestFlowReaderBlocksUntilFinishedAndCloseWakesIt(t *testing.T) {
	pr, pw := io.Pipe()
	const total = 2000
	go func() {
		for i := range total {
			if _, err := io.WriteString(pw, updateLine(i)); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	r := newFlowReader(pr, 16, discardLog())
	sc := bufio.NewScanner(r)
	lines := make(chan string, 64)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(lines)
		for sc.Scan() {
			lines <- sc.Text()
		}
	})
	i := 0
	for line := range lines {
		if line+"\n" != updateLine(i) {
			t.Fatalf("line %d = %q", i, line)
		}
		i++
		r.notificationDone()
	}
	wg.Wait()
	if i != total {
		t.Fatalf("got %d lines, want %d", i, total)
	}
	if _, _, max := r.stats(); max > 16 {
		t.Fatalf("max in flight %d exceeds the high-water mark 16", max)
	}
	stop := make(chan struct{})
	r.waitDrained(stop) // source at EOF, all finished: returns at once

	// A reader waiting for room returns once closed.
	r2 := newFlowReader(strings.NewReader(updateLine(0)+updateLine(1)), 1, discardLog())
	readAvailable(t, r2)
	done := make(chan error, 1)
	go func() {
		_, err := r2.Read(make([]byte, 1024))
		done <- err
	}()
	r2.Close()
	if err := <-done; !errors.Is(err, errFlowReaderClosed) {
		t.Fatalf("Read after Close: %v, want errFlowReaderClosed", err)
	}
}

// barrier returns once every notification handed before it was finished, or when its
// context ends.
func TestFlowReaderBarrier(t *testing.T) {
	r := newFlowReader(strings.NewReader(updateLine(0)+updateLine(1)), 8, discardLog())
	readAvailable(t, r)
	r.barrier(canceledContext()) // a cancelled wait returns at once
	done := make(chan struct{})
	go func() {
		r.barrier(context.Background())
		close(done)
	}()
	r.notificationDone()
	r.notificationDone()
	<-done
	r.barrier(context.Background()) // nothing outstanding: returns at once
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
