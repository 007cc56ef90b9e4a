package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/agenticd/agenticd/internal/daemon"
	"github.com/agenticd/agenticd/presenters"
)

const acpAgentID = "acp.test.scripted"

// agenticd is a real agenticd (internal/daemon on a loopback port, SQLite under a temp
// dir) serving the scripted ACP test agent.
type agenticd struct {
	cfg  daemon.Config
	srv  *daemon.Server
	ws   string // a workspace under the server's root
	addr string
}

// startAgenticd runs agenticd with the test agent playing script, its config changed by
// configure; it stops with the test.
func startAgenticd(t *testing.T, script string, configure ...func(*daemon.Config)) *agenticd {
	t.Helper()
	dir := t.TempDir()
	agent := filepath.Join(dir, "testagent")
	if out, err := exec.Command("go", "build", "-o", agent, "../../internal/testagent").CombinedOutput(); err != nil {
		t.Fatalf("building the test agent: %v\n%s", err, out)
	}
	scriptPath := filepath.Join(dir, "script.json")
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := &agenticd{ws: filepath.Join(root, "project"), cfg: daemon.Config{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), WorkspaceRoots: []string{root},
		Agents: []daemon.AgentConfig{{ID: acpAgentID, Type: presenters.AgentTypeACP, Command: agent,
			Env: map[string]string{"TESTAGENT_SCRIPT": scriptPath}, ReadPaths: []string{filepath.Dir(scriptPath)}}},
	}}
	for _, c := range configure {
		c(&d.cfg)
	}
	if err := os.Mkdir(d.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	t.Cleanup(func() { d.stop(t) })
	return d
}

func (d *agenticd) start(t *testing.T) {
	t.Helper()
	srv, err := daemon.Start(context.Background(), d.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("start agenticd: %v", err)
	}
	d.srv, d.addr = srv, srv.Addr()
}

func (d *agenticd) stop(t *testing.T) {
	t.Helper()
	if d.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.srv.Stop(ctx); err != nil {
		t.Errorf("stop agenticd: %v", err)
	}
	d.srv = nil
}

// restart stops agenticd and starts it again on the same data dir.
func (d *agenticd) restart(t *testing.T) {
	t.Helper()
	d.stop(t)
	d.start(t)
}

// ctl runs agenticctl with no terminal anywhere.
func (d *agenticd) ctl(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"--addr", d.addr, "--data-dir", d.cfg.DataDir}, args...), nil, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func (d *agenticd) mustCtl(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := d.ctl(args...)
	if code != 0 {
		t.Fatalf("agenticctl %v: exit %d, stderr %q", args, code, errOut)
	}
	return out
}

func (d *agenticd) newSession(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(d.mustCtl(t, "new", "--agent", acpAgentID, "--workspace", d.ws))
}

// terminal is a real pty; what agenticctl writes to it collects in screen.
type terminal struct {
	tty    *os.File // agenticctl's side
	master *os.File // the person's side
	screen *watchBuffer
	done   chan struct{}
}

func openTerminal(t *testing.T) *terminal {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{tty: tty, master: master, screen: &watchBuffer{}, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		_, _ = io.Copy(term.screen, master)
	}()
	t.Cleanup(func() {
		_ = tty.Close()
		_ = master.Close()
		<-term.done
	})
	return term
}

// drain waits until everything written to the terminal so far has reached the screen:
// a marker written after it arrives after it.
func (term *terminal) drain(t *testing.T) {
	t.Helper()
	const marker = "<drained>"
	if _, err := term.tty.Write([]byte(marker)); err != nil {
		t.Fatal(err)
	}
	term.screen.waitFor(t, regexp.MustCompile(regexp.QuoteMeta(marker)+`$`))
}

// typeLine types a line as a person would (Enter sends \r; the tty makes it \n).
func (term *terminal) typeLine(t *testing.T, s string) {
	t.Helper()
	if _, err := term.master.Write([]byte(s + "\r")); err != nil {
		t.Fatal(err)
	}
}

// watchBuffer collects output; waitFor waits until it matches.
type watchBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *watchBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *watchBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor returns the first submatches of re once the output matches it.
func (w *watchBuffer) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(w.String()); m != nil {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q within 30s in %q", re, w.String())
	return nil
}

func literal(s string) *regexp.Regexp { return regexp.MustCompile(regexp.QuoteMeta(s)) }

// permissionScript asks to edit notes.txt, offering four options out of order, and says
// which one the client chose. agenticd offers clients all but allow_always.
const permissionScript = `{"turns": [[
  {"text": "Hello. "},
  {"permission": {
    "toolCall": {"toolCallId": "edit-notes", "title": "Edit notes.txt", "kind": "edit", "status": "pending",
                 "locations": [{"path": "{cwd}/notes.txt"}]},
    "options": [
      {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
      {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
      {"optionId": "never", "name": "Never", "kind": "reject_always"},
      {"optionId": "always", "name": "Always allow", "kind": "allow_always"}],
    "report": true}},
  {"stop": "end_turn"}]]}`

type result struct {
	code   int
	stdout string
}

// sendOnTerminal runs `agenticctl send` with stdin and stderr on the terminal.
func sendOnTerminal(d *agenticd, term *terminal, args ...string) <-chan result {
	done := make(chan result, 1)
	go func() {
		var stdout bytes.Buffer
		code := run(append([]string{"--addr", d.addr, "--data-dir", d.cfg.DataDir, "send"}, args...), term.tty, &stdout, term.tty)
		done <- result{code, stdout.String()}
	}()
	return done
}

var question = regexp.MustCompile(`answer permission (\S+) here[^\n]*\n(?s:.*)your answer \[1-3\]: $`)

// On a terminal, send asks about a permission request itself: the options numbered in
// the order allow once, (allow always,) reject once, reject always; the choice read from
// the terminal is the answer.
func TestSendAsksOnTheTerminal(t *testing.T) {
	d := startAgenticd(t, permissionScript)
	id := d.newSession(t)
	term := openTerminal(t)
	done := sendOnTerminal(d, term, id, "edit", "the", "notes")

	m := term.screen.waitFor(t, question)
	for _, want := range []string{`1) allow once "Allow" (option allow)`, `2) reject once "Reject" (option reject)`,
		`3) reject always "Never" (option never)`} {
		if !strings.Contains(term.screen.String(), want) {
			t.Errorf("the question lacks %q: %q", want, term.screen.String())
		}
	}
	term.typeLine(t, "9")
	term.screen.waitFor(t, regexp.MustCompile(`type a number from 1 to 3[^\n]*\n.*your answer \[1-3\]: $`))
	term.typeLine(t, "3")
	r := <-done
	if r.code != 0 || r.stdout != "Hello. permission: reject_always never\n" {
		t.Errorf("send: exit %d, stdout %q; screen %q", r.code, r.stdout, term.screen.String())
	}
	term.screen.waitFor(t, literal(fmt.Sprintf(`rejected always: request %s of session %s (option never "Never")`, m[1], id)))
}

// Answered from another terminal, the question is withdrawn, saying who answered; the
// terminal is left alone afterwards (the test's goleak check sees no reader left).
func TestQuestionWithdrawnWhenAnsweredElsewhere(t *testing.T) {
	d := startAgenticd(t, permissionScript)
	id := d.newSession(t)
	term := openTerminal(t)
	done := sendOnTerminal(d, term, id, "edit")

	m := term.screen.waitFor(t, question)
	if out := d.mustCtl(t, "deny", id, m[1]); out != fmt.Sprintf("rejected once: request %s of session %s (option reject \"Reject\")\n", m[1], id) {
		t.Errorf("deny printed %q", out)
	}
	r := <-done
	if r.code != 0 || r.stdout != "Hello. permission: reject_once reject\n" {
		t.Errorf("send: exit %d, stdout %q; screen %q", r.code, r.stdout, term.screen.String())
	}
	term.screen.waitFor(t, literal(fmt.Sprintf("your answer [1-3]: \r\n  withdrawn: permission %s was answered elsewhere: another client rejected it (option reject)", m[1])))
}

// slowScript makes the model think before it answers, then asks a permission.
const slowScript = `{"turns": [[
  {"sleep": "2s"},
  {"text": "Hello."},
  {"permission": {"toolCall": {"toolCallId": "edit-notes", "title": "Edit notes.txt", "kind": "edit", "status": "pending"}, "report": true}},
  {"stop": "end_turn"}]]}`

// While it waits, send keeps a status line on stderr when that is a terminal, and erases
// it before anything else is printed; output to pipes has none of it.
func TestStatusLineOnlyOnATerminal(t *testing.T) {
	d := startAgenticd(t, slowScript)
	id := d.newSession(t)
	term := openTerminal(t)
	done := make(chan result, 1)
	go func() {
		var stdout bytes.Buffer
		code := run([]string{"--addr", d.addr, "--data-dir", d.cfg.DataDir, "send", id, "hi"}, nil, &stdout, term.tty)
		done <- result{code, stdout.String()}
	}()
	term.screen.waitFor(t, regexp.MustCompile(`waiting for the model… 1s`))
	m := term.screen.waitFor(t, regexp.MustCompile(`agenticctl approve \S+ (\S+)`))
	term.screen.waitFor(t, regexp.MustCompile(`waiting for your answer… 1s`))
	d.mustCtl(t, "approve", id, m[1])
	r := <-done
	if r.code != 0 || r.stdout != "Hello.permission: allow_once allow\n" {
		t.Errorf("send: exit %d, stdout %q", r.code, r.stdout)
	}
	term.drain(t)
	screen := term.screen.String()
	for _, status := range regexp.MustCompile(`waiting for [^\r\n]*?\d+s`).FindAllStringIndex(screen, -1) {
		if rest := screen[status[1]:]; !strings.HasPrefix(rest, "\r\x1b[K") {
			t.Errorf("a status line is followed by %q, not erased", rest[:min(len(rest), 20)])
		}
	}

	code, out, errOut := d.ctl("send", "--approve-all", id, "again")
	if code != 0 || out != "Hello.permission: allow_once allow\n" || strings.Contains(errOut, "waiting") || strings.Contains(errOut, "\x1b") {
		t.Errorf("send to pipes: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

const helloScript = `{"turns": [[{"text": "Hello."}, {"stop": "end_turn"}]]}`

// A session stored but not loaded since agenticd started is reopened by send, which says
// so; load says how many messages it holds.
func TestSendReopensAStoredSession(t *testing.T) {
	d := startAgenticd(t, helloScript)
	t.Chdir(d.ws)
	if out := d.mustCtl(t, "agents"); !regexp.MustCompile(acpAgentID + `\s+acp\s+\S+\s+\S+\s+config \(no file\)`).MatchString(out) {
		t.Errorf("agents does not show where the agent's config came from: %q", out)
	}
	if out := d.mustCtl(t, "agents"); !regexp.MustCompile(`(?m)^confinement: (on|partial|off)\b`).MatchString(out) {
		t.Errorf("agents does not show the confinement: %q", out)
	}
	id := strings.TrimSpace(d.mustCtl(t, "new", "--agent", acpAgentID, "--workspace", "."))
	if out := d.mustCtl(t, "sessions"); !strings.Contains(out, d.ws) {
		t.Errorf("--workspace . did not become %s: %q", d.ws, out)
	}
	if out := d.mustCtl(t, "send", id, "hi"); out != "Hello.\n" {
		t.Fatalf("send printed %q", out)
	}
	d.restart(t)

	code, out, errOut := d.ctl("send", id, "again")
	if code != 0 || out != "Hello.\n" || errOut != "agenticctl: session "+id+" was not loaded; reopened it (2 stored messages)\n" {
		t.Errorf("send to a stored session: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	d.mustCtl(t, "close", id)
	if out := d.mustCtl(t, "load", id); out != "reopened session "+id+": idle, 4 stored messages\n" {
		t.Errorf("load printed %q", out)
	}
}

// A session whose agent stopped is in error; send reopens it too.
func TestSendReopensASessionInError(t *testing.T) {
	d := startAgenticd(t, `{"turns": [[{"crashOnce": "{cwd}/crashed"}, {"text": "Hello."}, {"stop": "end_turn"}]]}`)
	id := d.newSession(t)
	if code, _, errOut := d.ctl("send", id, "hi"); code == 0 {
		t.Fatalf("send to an agent that crashes: exit 0, stderr %q", errOut)
	}
	code, out, errOut := d.ctl("send", id, "again")
	if code != 0 || out != "Hello.\n" || !regexp.MustCompile(`^agenticctl: session \S+ had stopped \(.+\); reopened it \(\d+ stored messages?\)\n$`).MatchString(errOut) {
		t.Errorf("send to a session in error: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// When the stored session cannot be reopened, send says why and how to try again.
func TestSendToASessionThatCannotBeReopened(t *testing.T) {
	d := startAgenticd(t, helloScript)
	id := d.newSession(t)
	d.restart(t)
	if err := os.RemoveAll(d.ws); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := d.ctl("send", id, "hi")
	if code != 1 || !strings.HasPrefix(errOut, "agenticctl send: session "+id+" was not loaded, and reopening it failed: ") ||
		!strings.Contains(errOut, "(run `agenticctl load "+id+"` to try again)") || strings.Contains(errOut, "rpc error") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// Errors name agenticctl's commands and keep the server's words, without gRPC's.
func TestErrorsSpeakAgenticctl(t *testing.T) {
	d := startAgenticd(t, `{"turns": [[{"text": "Working."}, {"waitCancel": true}, {"stop": "cancelled"}], [{"text": "Second."}]]}`)
	id := d.newSession(t)
	first := make(chan int, 1)
	go func() {
		code, _, _ := d.ctl("send", id, "one")
		first <- code
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(d.mustCtl(t, "get", id), "SESSION_STATUS_GENERATING") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// A message sent during a turn waits for it, and says so.
	type result struct {
		code        int
		out, errOut string
	}
	second := make(chan result, 1)
	go func() {
		code, out, errOut := d.ctl("send", id, "two")
		second <- result{code, out, errOut}
	}()
	for !strings.Contains(d.mustCtl(t, "get", id), "queuedMessages") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// An error names agenticctl's commands and the reason, not gRPC's words.
	code, _, errOut := d.ctl("approve", id, "no-such-permission")
	if code != 1 || !strings.HasPrefix(errOut, "agenticctl approve: PERMISSION_NOT_PENDING: ") ||
		strings.Contains(errOut, "rpc error") || strings.Contains(errOut, "NotFound") || strings.Contains(errOut, "RespondPermission") {
		t.Errorf("approve of an unknown request: exit %d, stderr %q", code, errOut)
	}
	d.mustCtl(t, "cancel", id)
	if code := <-first; code != 130 {
		t.Errorf("the cancelled send exited %d, want 130", code)
	}
	if r := <-second; r.code != 0 || r.out != "Second.\n" || !strings.Contains(r.errOut, "agenticctl: queued as ") {
		t.Errorf("the send made during a turn: exit %d, stdout %q, stderr %q; want it queued, then answered", r.code, r.out, r.errOut)
	}
}

// With nothing configured, agenticctl reaches a local agenticd through the socket in its
// data dir, which needs no token, and `web` prints a sign-in link for the page.
func TestFindsTheLocalAgenticdByItself(t *testing.T) {
	t.Setenv("AGENTICD_ADDR", "")
	t.Setenv("AGENTICD_TOKEN", "")
	dataDir, err := os.MkdirTemp("", "actl-") // short: a socket's path is bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	t.Setenv("AGENTICD_DATA_DIR", dataDir)
	d := &agenticd{cfg: daemon.Config{Listen: "127.0.0.1:0", DataDir: dataDir, WorkspaceRoots: []string{t.TempDir()}}}
	d.start(t)
	t.Cleanup(func() { d.stop(t) })
	var stdout, stderr bytes.Buffer
	if code := run([]string{"agents"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "deepchat.default") {
		t.Fatalf("agents with nothing configured: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"web"}, nil, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "http://"+d.addr+"/login?code=") {
		t.Fatalf("web: exit %d, stdout %q, stderr %q; want a link to %s", code, stdout.String(), stderr.String(), d.addr)
	}
	// Without the socket and the token file, the server says what is missing.
	os.Remove(filepath.Join(dataDir, "agenticd.sock"))
	os.Remove(filepath.Join(dataDir, "token"))
	stderr.Reset()
	if code := run([]string{"--addr", d.addr, "agents"}, nil, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "TOKEN_INVALID: missing credentials") {
		t.Fatalf("agents without credentials: exit %d, stderr %q", code, stderr.String())
	}
}
