package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// chromiumPath is where Debian's chromium package (scripts/deps.sh installs it) puts
// the browser.
const chromiumPath = "/usr/bin/chromium"

// browserWait bounds each wait for the page; the whole test takes about 10 s.
const browserWait = 20 * time.Second

// The reply the scripted agent streams, in the order it streams it. The pause before the
// last part is when the test reloads the page.
const (
	replyBeforePermission = "Hello! I will write NOTES.md."
	// The agent's write step reports its result ("write ok") as text.
	replyAfterPermission = "write ok Part two."
	replyAfterReload     = " Part three."
)

// browserScript is a session with modes and models and the turns the page drives: the
// first has reasoning, text, a plan, an edit tool call that waits for a permission, its
// diff once allowed, more text, a pause (the reload), the rest of the text and usage;
// the second waits to be cancelled.
var browserScript = fmt.Sprintf(`{
 "session": {
   "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]},
   "models": {"currentModelId": "small", "availableModels": [{"modelId": "small", "name": "Small"}, {"modelId": "large", "name": "Large"}]}},
 "turns": [[
 {"thought": "Thinking about the notes."},
 {"text": "Hello! "}, {"text": "I will write NOTES.md."},
 {"update": {"sessionUpdate": "plan", "entries": [
   {"content": "Write NOTES.md", "status": "in_progress", "priority": "high"},
   {"content": "Say so", "status": "pending", "priority": "low"}]}},
 {"update": {"sessionUpdate": "tool_call", "toolCallId": "write-notes", "title": "Write NOTES.md", "kind": "edit", "status": "pending",
   "locations": [{"path": "{cwd}/NOTES.md"}]}},
 {"permission": {"toolCall": {"toolCallId": "write-notes",
   "content": [{"type": "diff", "path": "{cwd}/NOTES.md", "oldText": "old notes\n", "newText": "new notes\n"}]},
   "onAllow": [
     {"write": {"path": "{cwd}/NOTES.md", "content": "new notes\n"}},
     {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "write-notes", "status": "completed",
       "content": [{"type": "diff", "path": "{cwd}/NOTES.md", "oldText": "old notes\n", "newText": "new notes\n"}]}},
     {"text": " Part two."}, {"sleep": "4s"}, {"text": %q}],
   "onReject": [{"update": {"sessionUpdate": "tool_call_update", "toolCallId": "write-notes", "status": "failed"}}]}},
 {"stop": "end_turn", "usage": {"inputTokens": 12, "outputTokens": 34, "totalTokens": 46}}
 ], [
 {"text": "Waiting."}, {"waitCancel": true}, {"stop": "cancelled"}
]]}`, replyAfterReload)

// A whole turn in a real browser against a real agenticd: the page lists the agent,
// creates a session, sends a message with the keyboard, streams the reply, asks for the
// permission and sends the click, shows the tool's diff; reloaded in the middle of the
// turn, it redraws the session and follows the rest of the reply with nothing missing
// and nothing twice.
func TestBrowserWholeTurn(t *testing.T) {
	browser := chromiumOrSkip(t)
	root, ws := workspaceUnder(t)
	if err := os.WriteFile(filepath.Join(ws, "NOTES.md"), []byte("old notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const agentID = "acp.test.browser"
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, agentID, browserScript)}})
	ctx := startBrowser(t, browser)
	page := &pageDriver{t: t, ctx: ctx}

	page.run("sign in and open the page", chromedp.Navigate(signInLink(t, s)),
		chromedp.WaitVisible(fmt.Sprintf(`[data-testid=agent][data-agent-id=%q]`, agentID)))
	if u := get(page, "read the address", chromedp.Location()); u != "http://"+s.Addr+"/" {
		t.Errorf("after signing in the page is at %q: the one-time code must not stay in the address", u)
	}

	page.run("create a session", chromedp.SetValue(`#new-agent`, agentID),
		chromedp.SendKeys(`#new-workspace`, ws), chromedp.Click(`#create-session`),
		chromedp.WaitVisible(`#chat`), chromedp.WaitVisible(`#session-status[data-status=idle]`),
		chromedp.WaitVisible(`#chat[data-live=true]`))
	sessionID := get(page, "read the session id", chromedp.AttributeValue(`#chat`, "data-session-id")).Value
	if sessionID == "" {
		t.Fatal("the chat view names no session after Create session")
	}
	page.run("see the session listed", chromedp.WaitVisible(fmt.Sprintf(`[data-testid=session-link][data-session-id=%q]`, sessionID)))

	page.run("choose a mode and a model", chromedp.SetValue(`#mode-select`, "code"), chromedp.SetValue(`#model-select`, "large"),
		chromedp.Evaluate[chromedp.Void](`['mode-select', 'model-select'].forEach(id => document.getElementById(id).dispatchEvent(new Event('change')))`))
	waitSession(t, s, sessionID, "the mode and model the page chose", func(si *agenticv1.SessionInfo) bool {
		return si.GetCurrentModeId() == "code" && si.GetCurrentModelId() == "large"
	})

	// Enter in the message box sends.
	page.run("send a message", chromedp.SendKeys(`#message-input`, "write notes"+kb.Enter))
	page.waitText("the streamed text", assistantTextJS, replyBeforePermission)
	page.waitVisible("the reasoning", `[data-role=assistant] [data-testid=reasoning]`)
	page.waitVisible("the plan", `[data-role=assistant] [data-testid=plan] li:nth-child(2)`)
	page.waitVisible("the pending tool", `[data-testid=tool][data-tool-id=write-notes][data-status=pending]`)

	// The change is shown, highlighted, above the answers, before anyone allows it.
	page.waitVisible("the diff to approve", `[data-testid=permission] [data-testid=diff]`)
	asked := get(page, "read the diff to approve", chromedp.Evaluate[string](`(() => {
		const card = document.querySelector('[data-testid=permission]');
		const diff = card.querySelector('[data-testid=diff]');
		const first = card.querySelector('[data-testid=permission-option]');
		const above = (diff.compareDocumentPosition(first) & Node.DOCUMENT_POSITION_FOLLOWING) !== 0;
		return [diff.querySelector('.del')?.textContent, diff.querySelector('.add')?.textContent, above].join('|');
	})()`))
	if asked != "- old notes\n|+ new notes\n|true" {
		t.Errorf("the permission request's diff reads %q; want the old line marked removed, the new one added, above the answers", asked)
	}
	page.run("allow the tool", chromedp.Click(`[data-testid=permission] [data-option-kind=allow_once]`))
	page.waitVisible("the finished tool", `[data-testid=tool][data-tool-id=write-notes][data-status=completed]`)
	diff := get(page, "read the diff", chromedp.Text(`[data-testid=tool][data-tool-id=write-notes] [data-testid=diff]`))
	if !strings.Contains(diff, "- old notes") || !strings.Contains(diff, "+ new notes") {
		t.Errorf("the tool's diff reads %q; want the old line removed and the new one added", diff)
	}
	page.waitText("the text after the permission", assistantTextJS, replyBeforePermission+replyAfterPermission)
	if n := page.count(`[data-testid=permission]`); n != 0 {
		t.Errorf("%d permission requests still shown after the tool was allowed", n)
	}

	// The agent pauses for 4 s before the last part: reload now.
	page.run("reload mid-turn", chromedp.Reload(), chromedp.WaitVisible(`#chat[data-live=true]`))
	got, err := s.Client.GetSession(context.Background(), &agenticv1.GetSessionRequest{SessionId: sessionID})
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	if got.GetSession().GetMessageInFlight() == "" {
		t.Fatal("the turn ended before the reloaded page had caught up: this run did not reload in the middle of a turn")
	}
	page.waitVisible("the reply's text rebuilt after the reload", `[data-role=assistant] [data-testid=text]`)
	if text := page.eval(assistantTextJS); !strings.HasPrefix(replyBeforePermission+replyAfterPermission+replyAfterReload, text) {
		t.Errorf("right after the reload the reply reads %q; want a beginning of %q", text, replyBeforePermission+replyAfterPermission+replyAfterReload)
	}

	page.waitVisible("the turn's end", `[data-role=assistant][data-state=complete]`)
	page.waitVisible("the session idle again", `#chat[data-turn=idle] #session-status[data-status=idle]`)
	if text, want := page.eval(assistantTextJS), replyBeforePermission+replyAfterPermission+replyAfterReload; text != want {
		t.Errorf("after the reload the reply reads %q; want %q, every part exactly once", text, want)
	}
	if text := page.eval(`[...document.querySelectorAll('[data-role=user] [data-testid=text]')].map(e => e.textContent).join('|')`); text != "write notes" {
		t.Errorf("the user's messages read %q; want %q once", text, "write notes")
	}
	if n := page.count(`[data-testid=tool][data-tool-id=write-notes][data-status=completed] [data-testid=diff]`); n != 1 {
		t.Errorf("%d finished tool calls with a diff after the reload; want 1", n)
	}
	if n := page.count(`[data-role=assistant] [data-testid=reasoning]`); n != 1 {
		t.Errorf("%d reasoning parts after the reload; want 1", n)
	}
	footer := get(page, "read the usage", chromedp.Text(`[data-role=assistant] [data-testid=message-footer]`))
	if !strings.Contains(footer, "total 46") {
		t.Errorf("the reply's footer reads %q; want its usage (total 46)", footer)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "NOTES.md")); err != nil || string(b) != "new notes\n" {
		t.Errorf("NOTES.md after the allowed edit: %q, %v; want %q", b, err, "new notes\n")
	}

	page.run("send a second message", chromedp.SendKeys(`#message-input`, "wait"), chromedp.Click(`#send`))
	page.waitText("the second reply", `[...document.querySelectorAll('[data-role=assistant]')].slice(1).map(m => [...m.querySelectorAll('[data-testid=text]')].map(e => e.textContent).join('')).join('|')`, "Waiting.")
	page.run("cancel the turn", chromedp.Click(`#cancel:not([disabled])`))
	page.waitVisible("the cancelled reply", `[data-role=assistant][data-state=cancelled]`)
	page.waitVisible("the session idle after the cancel", `#chat[data-turn=idle] #cancel[disabled]`)
}

// waitSession polls GetSession until ok accepts the session.
func waitSession(t *testing.T, s *testServer, sessionID, what string, ok func(*agenticv1.SessionInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(browserWait)
	for {
		resp, err := s.Client.GetSession(context.Background(), &agenticv1.GetSessionRequest{SessionId: sessionID})
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		if ok(resp.GetSession()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: the session is %v", what, resp.GetSession())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// assistantTextJS is the text of the assistant's replies on the page, in order.
const assistantTextJS = `[...document.querySelectorAll('[data-role=assistant] [data-testid=text]')].map(e => e.textContent).join('')`

// chromiumOrSkip returns the browser's path. Without it the test skips on a developer's
// machine and fails under CI, where scripts/deps.sh installs it: a browser test that
// silently skipped there would prove nothing.
func chromiumOrSkip(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (%v): install Debian's chromium package (make deps does)", chromiumPath, err)
		}
		t.Skipf("%s is missing: install Debian's chromium package (make deps does) to run the web page's browser test", chromiumPath)
	}
	return chromiumPath
}

// startBrowser starts a headless Chromium with a fresh profile for the test. It is
// closed when the test ends (after a screenshot, if the test failed), and its process
// and chromedp's goroutines are gone by then.
func startBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		// /dev/shm is small in containers; Chromium then crashes tabs.
		chromedp.Flag("disable-dev-shm-usage", true))
	if os.Geteuid() == 0 {
		// Chromium refuses to start as root with its sandbox on (it needs an unprivileged
		// user for its namespaces): CI containers run as root. The page it loads is the
		// test's own, served from loopback.
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	// Cleanups run last first: screenshot, close the browser, wait for the console
	// reader, then the allocator, which waits for the browser's process to exit.
	t.Cleanup(cancelAlloc)
	if err := chromedp.Do(ctx); err != nil {
		cancelBrowser()
		t.Fatalf("starting %s: %v", path, err)
	}
	// The page's console and uncaught exceptions go to the test log.
	messages := chromedp.Console(ctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			t.Logf("page console: %s", m)
		}
	}()
	t.Cleanup(func() { <-consoleDone })
	t.Cleanup(cancelBrowser)
	t.Cleanup(func() {
		if t.Failed() {
			saveScreenshot(t, ctx)
		}
	})
	return ctx
}

// saveScreenshot saves the page as it is (PNG: quality 100) to a file outside the repository and logs where.
func saveScreenshot(t *testing.T, ctx context.Context) {
	shotCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(shotCtx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("no screenshot of the failed page: %v", err)
		return
	}
	f, err := os.CreateTemp("", "agenticd-"+t.Name()+"-*.png")
	if err != nil {
		t.Logf("no screenshot of the failed page: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(png); err != nil {
		t.Logf("no screenshot of the failed page: %v", err)
		return
	}
	t.Logf("screenshot of the failed page: %s", f.Name())
}

// pageDriver runs chromedp actions with a deadline each and fails the test with what it
// was doing.
type pageDriver struct {
	t   *testing.T
	ctx context.Context
}

func (p *pageDriver) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	get(p, what, chromedp.Steps(actions...))
}

// get runs one action that returns a value, as run does.
func get[T any](p *pageDriver, what string, action chromedp.Action[T]) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserWait)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("not within %s", browserWait)
		}
		p.t.Fatalf("%s: %v (the page says: %q)", what, err, p.status())
	}
	return v
}

func (p *pageDriver) waitVisible(what, selector string) {
	p.t.Helper()
	p.run("wait for "+what+" ("+selector+")", chromedp.WaitVisible(selector))
}

// waitText waits until the expression's value is want, and fails showing its last value.
func (p *pageDriver) waitText(what, expr, want string) {
	p.t.Helper()
	deadline := time.Now().Add(browserWait)
	var got string
	for time.Now().Before(deadline) {
		if got = p.eval(expr); got == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("waiting for %s: the page shows %q, want %q (the page says: %q)", what, got, want, p.status())
}

func (p *pageDriver) eval(expr string) string {
	p.t.Helper()
	return get(p, "evaluate "+expr, chromedp.Evaluate[string](expr))
}

func (p *pageDriver) count(selector string) int {
	p.t.Helper()
	sel, _ := json.Marshal(selector)
	return get(p, "count "+selector, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%s).length`, sel)))
}

// status is what the page shows about its connection and errors, for failure messages.
func (p *pageDriver) status() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`['page-error', 'chat-error', 'connection', 'new-session-error'].map(id => document.getElementById(id)?.textContent ?? '').filter(s => s).join(' / ')`))
	return s
}

// signInLink is a one-time link that signs a browser in to s's page, as `agenticctl
// web` prints it.
func signInLink(t *testing.T, s *testServer) string {
	t.Helper()
	resp, err := s.Client.CreateWebLogin(context.Background(), &agenticv1.CreateWebLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + s.Addr + resp.GetPath()
}

// Without signing in, the page says how to, and lists nothing.
func TestBrowserAsksToSignIn(t *testing.T) {
	browser := chromiumOrSkip(t)
	s := startServer(t, daemon.Config{})
	page := &pageDriver{t: t, ctx: startBrowser(t, browser)}
	page.run("open the page", chromedp.Navigate("http://"+s.Addr+"/"), chromedp.WaitVisible(`[data-testid=sign-in-hint]`))
	if n := page.count(`[data-testid=agent]`); n != 0 {
		t.Fatalf("%d agents listed before signing in", n)
	}
	page.run("sign in", chromedp.Navigate(signInLink(t, s)), chromedp.WaitVisible(`[data-testid=agent][data-agent-id="deepchat.default"]`))
	if n := page.count(`#token-form:not([hidden])`); n != 0 {
		t.Error("the page still asks to sign in after the link was opened")
	}
}

// With a token configured the page loads, asks for the token when the API answers
// UNAUTHENTICATED, and once given one it lists the agents; a wrong token is asked again.
func TestBrowserAsksForToken(t *testing.T) {
	browser := chromiumOrSkip(t)
	const token = "browser-test-token"
	s := startServer(t, daemon.Config{Token: token})
	page := &pageDriver{t: t, ctx: startBrowser(t, browser)}

	page.run("open the page", chromedp.Navigate("http://"+s.Addr+"/"), chromedp.WaitVisible(`#token-form`))
	page.run("give a wrong token", chromedp.SendKeys(`#token-input`, "wrong"+kb.Enter))
	page.waitText("the token asked again", `String(sessionStorage.getItem('agenticd.token') === 'wrong' && !document.getElementById('token-form').hidden)`, "true")
	if n := page.count(`[data-testid=agent]`); n != 0 {
		t.Fatalf("%d agents listed with a wrong token", n)
	}
	page.run("give the token", chromedp.SendKeys(`#token-input`, token+kb.Enter),
		chromedp.WaitVisible(`[data-testid=agent][data-agent-id="deepchat.default"]`), chromedp.WaitNotVisible(`#token-form`))
	// The token lasts for the tab: a reload does not ask again.
	page.run("reload", chromedp.Reload(), chromedp.WaitVisible(`[data-testid=agent][data-agent-id="deepchat.default"]`))
	if n := page.count(`#token-form:not([hidden])`); n != 0 {
		t.Error("the page asked for the token again after a reload")
	}
}
