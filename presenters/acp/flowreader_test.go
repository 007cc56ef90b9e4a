package acp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

func updateLine(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, i) + "\n"
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// updateLog is an sdk.Client whose SessionUpdate records the chunk texts into a log
// shared with the test, and optionally waits on a gate first.
type updateLog struct {
	floodClient // the other methods; never called here

	mu      sync.Mutex
	entries []string
	entered chan struct{} // receives once per update, before the gate
	gate    chan struct{} // when set, every update waits for a value
}

func (u *updateLog) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	if u.entered != nil {
		u.entered <- struct{}{}
	}
	if u.gate != nil {
		<-u.gate
	}
	u.add("update " + n.Update.AgentMessageChunk.Content.Text.Text)
	return nil
}

func (u *updateLog) add(e string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.entries = append(u.entries, e)
}

func (u *updateLog) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.entries...)
}

// Updates are handled in the reader, each before any later line reaches the SDK;
// everything else reaches the SDK as it is, in order; what the SDK would drop is
// dropped (and no longer counted: nothing can leak and stall the agent), and so are
// vendors' own notifications, which the SDK would log as errors.
func TestAgentReaderHandlesUpdatesInOrderAndPassesTheRest(t *testing.T) {
	response := `{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`
	request := `{"jsonrpc":"2.0","id":"a","method":"session/request_permission","params":{}}`
	cancel := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`
	vendor := `{"jsonrpc":"2.0","method":"_vendor/notice","params":{}}`
	bad := []string{
		"not json at all",
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":5,"update":{}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":7}}}`,
		"",
	}
	src := updateLine(0) + response + "\n" + updateLine(1) + request + "\n" + strings.Join(bad, "\n") + "\n" +
		cancel + "\n" + updateLine(2) + vendor + "\n" + updateLine(3)
	log := &updateLog{}
	r := newAgentReader(strings.NewReader(src), log, discardLog())
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		log.add("sdk " + sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"update 0", "sdk " + response, "update 1", "sdk " + request, "sdk " + cancel, "update 2", "update 3"}
	if got := log.list(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("order:\n got %q\nwant %q", got, want)
	}
}

// While an update is being handled nothing more is read from the agent: its next write
// blocks until the handler returns. That is the whole of the flow control.
func TestAgentReaderStopsReadingWhileAnUpdateIsHandled(t *testing.T) {
	pr, pw := io.Pipe()
	log := &updateLog{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	r := newAgentReader(pr, log, discardLog())
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			log.add("sdk " + sc.Text())
		}
	})
	secondWritten := make(chan struct{})
	wg.Go(func() { agentWrites(pw, secondWritten) })

	<-log.entered // the first update is being handled and held
	blocked := make(chan struct{})
	wg.Go(func() {
		if waitForGoroutineIn("acp.agentWrites", "io.(*pipe).write", secondWritten) {
			close(blocked)
		}
	})
	select {
	case <-secondWritten:
		close(log.gate) // let everything finish, then fail
		wg.Wait()
		t.Fatal("the agent's next line was read while an update was still being handled: no backpressure")
	case <-blocked:
	}
	log.gate <- struct{}{}
	<-secondWritten
	<-log.entered
	log.gate <- struct{}{}
	wg.Wait()
	if got, want := log.list(), []string{"update 0", "update 1", "sdk {}"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("handled %q, want %q", got, want)
	}
}

// agentWrites plays an agent writing two updates and a last line, each write returning
// only once the reader took it.
func agentWrites(w *io.PipeWriter, secondWritten chan<- struct{}) {
	_, _ = io.WriteString(w, updateLine(0))
	_, _ = io.WriteString(w, updateLine(1))
	close(secondWritten)
	_, _ = io.WriteString(w, "{}\n")
	_ = w.Close()
}

// waitForGoroutineIn reports true once some goroutine's stack holds both function
// names, false if stop closes first.
func waitForGoroutineIn(fn, blockedIn string, stop <-chan struct{}) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(g, blockedIn) {
				return true
			}
		}
		select {
		case <-stop:
			return false
		default:
			runtime.Gosched()
		}
	}
}

// A line longer than the SDK can take is not dropped silently (a dropped response
// would leave its caller waiting forever): reading fails, which ends the connection.
func TestAgentReaderFailsOnAnOverLongLine(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("y", maxLineBytes) + `"}}` + "\n"
	r := newAgentReader(strings.NewReader(updateLine(0)+long+updateLine(1)), &updateLog{}, discardLog())
	_, err := io.ReadAll(r)
	if !errors.Is(err, errLineTooLong) || !errors.Is(r.fatalError(), errLineTooLong) {
		t.Fatalf("read error %v, fatal %v; want errLineTooLong", err, r.fatalError())
	}
}

// Long lines below the limit reach the SDK whole, however small its reads.
func TestAgentReaderServesLongLinesInPieces(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("y", 200_000) + `"}}` + "\n"
	log := &updateLog{}
	r := newAgentReader(strings.NewReader(long+updateLine(2)), log, discardLog())
	var out strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != long || strings.Join(log.list(), "") != "update 2" {
		t.Fatalf("long line not passed through intact (%d bytes of %d), updates %q", out.Len(), len(long), log.list())
	}
}
