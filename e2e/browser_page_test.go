package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// markdownReply is Markdown with a code block, and HTML and a javascript: link that
// must neither run nor become elements.
const markdownReply = "# Notes\n\nSome **bold** text.\n\n```go\nfunc main() {}\n```\n\n" +
	`<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>` + "\n\n[click](javascript:window.__pwned=3)\n"

// linesScript streams enough lines to overflow the list, then waits at a permission
// request (the test scrolls up meanwhile) and streams as many again.
func linesScript() string {
	var before, after []string
	for i := range 40 {
		before = append(before, fmt.Sprintf(`{"text": "line %d\n\n"}`, i))
		after = append(after, fmt.Sprintf(`{"text": "more %d\n\n"}`, i))
	}
	return fmt.Sprintf(`{
 "agent": {"loadSession": false},
 "turns": [[
 {"text": %q}, {"stop": "end_turn", "usage": {"inputTokens": 5, "outputTokens": 7, "totalTokens": 12}}
 ], [
 %s,
 {"update": {"sessionUpdate": "tool_call", "toolCallId": "gate", "title": "Gate", "kind": "other", "status": "pending"}},
 {"permission": {"toolCall": {"toolCallId": "gate"}, "onAllow": [%s]}},
 {"stop": "end_turn"}
 ]]}`, markdownReply, strings.Join(before, ", "), strings.Join(after, ", "))
}

// atEndJS says whether the message list shows its end.
const atEndJS = `(() => { const l = document.getElementById('messages'); return String(l.scrollHeight - l.scrollTop - l.clientHeight <= 40); })()`

// The page without a session shows no chat panel; with one, it renders the agent's
// Markdown (sanitized, code highlighted), follows new output until the reader scrolls
// up, shows an opened session's end, the roots, usage and the audit trail, and closes,
// reopens and deletes the session.
func TestBrowserMarkdownFollowAndSessionActions(t *testing.T) {
	browserPath := chromiumOrSkip(t)
	root, ws := workspaceUnder(t)
	const agentID = "acp.test.page"
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, agentID, linesScript())}})
	page := &pageDriver{t: t, ctx: startBrowser(t, browserPath)}

	page.run("sign in", chromedp.Navigate(signInLink(t, s)), chromedp.WaitVisible(fmt.Sprintf(`[data-testid=agent][data-agent-id=%q]`, agentID)))
	if d := page.eval(`getComputedStyle(document.getElementById('chat')).display`); d != "none" {
		t.Errorf("without a session the chat panel has display %q; want none", d)
	}
	info, err := s.Client.GetServerInfo(context.Background(), &agenticv1.GetServerInfoRequest{})
	if err != nil || len(info.GetWorkspaceRoots()) != 1 {
		t.Fatalf("GetServerInfo: %v, roots %q", err, info.GetWorkspaceRoots())
	}
	page.waitVisible("the workspace root as a hint", fmt.Sprintf(`[data-testid=workspace-root][data-root=%q]`, info.GetWorkspaceRoots()[0]))

	page.run("create a session", chromedp.SetValue(`#new-agent`, agentID), chromedp.SendKeys(`#new-workspace`, ws),
		chromedp.Click(`#create-session`), chromedp.WaitVisible(`#chat[data-live=true]`))
	sessionID := get(page, "read the session id", chromedp.AttributeValue(`#chat`, "data-session-id")).Value

	// Markdown, sanitized.
	page.run("send", chromedp.SendKeys(`#message-input`, "notes"+kb.Enter))
	page.waitVisible("the turn's end", `[data-role=assistant][data-state=complete]`)
	reply := `[data-role=assistant] [data-testid=text]`
	for sel, want := range map[string]int{
		reply + ` h1`: 1, reply + ` strong`: 1,
		reply + ` pre code.language-go .hljs-keyword`: 1,
		reply + ` img`: 0, `script:not([src])`: 0, `[onerror]`: 0, reply + ` a[href^=javascript]`: 0,
	} {
		if n := page.count(sel); n != want {
			t.Errorf("%d elements %s in the rendered reply; want %d", n, sel, want)
		}
	}
	if text := page.eval(`document.querySelector('[data-role=assistant] [data-testid=text]').textContent`); !strings.Contains(text, `<img src=x onerror=`) {
		t.Errorf("the reply reads %q; want the HTML shown as text", text)
	}
	if v := page.eval(`String(window.__pwned)`); v != "undefined" {
		t.Errorf("the agent's HTML ran: window.__pwned = %s", v)
	}
	page.waitText("the session's usage", `document.getElementById('session-usage').textContent`, "tokens: in 5, out 7, total 12")

	// Following: at the end while the lines stream, then the reader scrolls up.
	page.run("send the long turn", chromedp.SendKeys(`#message-input`, "lines"+kb.Enter))
	page.waitVisible("the gate", `[data-testid=permission]`)
	page.waitText("the last line before the gate", `String(document.getElementById('messages').textContent.includes('line 39'))`, "true")
	if over := page.eval(`(() => { const l = document.getElementById('messages'); return String(l.scrollHeight > 2 * l.clientHeight); })()`); over != "true" {
		t.Fatal("the lines do not overflow the list: this run tests no following")
	}
	page.waitText("the list following the output", atEndJS, "true")
	page.run("scroll up", chromedp.Evaluate[chromedp.Void](`document.getElementById('messages').scrollTop = 0`))
	page.waitText("the scroll noticed", `String(document.getElementById('messages').scrollTop)`, "0")
	page.run("open the gate", chromedp.Click(`[data-testid=permission] [data-option-kind=allow_once]`))
	page.waitText("the turn's end after the gate", `String(document.querySelectorAll('[data-role=assistant][data-state=complete]').length)`, "2")
	if top := page.eval(`String(document.getElementById('messages').scrollTop)`); top != "0" {
		t.Errorf("new output moved a reader who had scrolled up to %s; want them left at 0", top)
	}
	page.waitVisible("the way back to the end", `#jump-end`)
	page.run("jump to the end", chromedp.Click(`#jump-end`))
	page.waitText("the list at its end", atEndJS, "true")

	page.run("reload", chromedp.Reload(), chromedp.WaitVisible(`#chat[data-live=true]`))
	page.waitText("an opened session showing its end", atEndJS, "true")

	// The audit trail has the permission and its decision.
	page.run("open the audit trail", chromedp.Click(`#audit summary`))
	page.waitVisible("the decision in the audit trail", `[data-testid=audit-entry][data-kind=permission_decided]`)

	page.run("close", chromedp.Click(`#close-session`))
	page.waitVisible("the session closed", `#session-status[data-status=closed]`)
	page.run("reopen", chromedp.Click(`#reopen-session:not([hidden])`))
	page.waitVisible("the session open again", `#session-status[data-status=idle]`)

	page.run("ask to delete", chromedp.Click(`#delete-session`))
	if _, err := s.Client.GetSession(context.Background(), &agenticv1.GetSessionRequest{SessionId: sessionID}); err != nil {
		t.Fatalf("one click deleted the session: %v", err)
	}
	page.run("delete", chromedp.Click(`#delete-session[data-confirm=true]`))
	page.run("the chat panel gone", chromedp.WaitNotVisible(`#chat`))
	page.waitText("the session unlisted", fmt.Sprintf(`String(document.querySelectorAll('[data-testid=session-link][data-session-id=%q]').length)`, sessionID), "0")
	if _, err := s.Client.GetSession(context.Background(), &agenticv1.GetSessionRequest{SessionId: sessionID}); status.Code(err) != codes.NotFound {
		t.Errorf("GetSession after Delete in the page: %v; want NOT_FOUND", err)
	}
}

// The agent's form in the page: the person is asked for consent to notifications, is
// notified while the tab is hidden, fills the form, and the agent gets the values.
func TestBrowserElicitationFormAndNotification(t *testing.T) {
	browserPath := chromiumOrSkip(t)
	root, ws := workspaceUnder(t)
	const agentID = "acp.test.elicit"
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, agentID, `{"turns": [[
	 {"elicit": {"message": "Which port?", "schema": {"type": "object", "properties": {
	   "port": {"type": "integer", "title": "Port", "minimum": 1, "maximum": 65535},
	   "tls": {"type": "boolean", "title": "TLS"},
	   "env": {"type": "string", "enum": ["dev", "prod"]}}, "required": ["port", "env"]}}},
	 {"stop": "end_turn"}
	]]}`)}})
	ctx := startBrowser(t, browserPath)
	page := &pageDriver{t: t, ctx: ctx}

	page.run("sign in", chromedp.Navigate(signInLink(t, s)), chromedp.WaitVisible(fmt.Sprintf(`[data-testid=agent][data-agent-id=%q]`, agentID)))
	page.waitVisible("the offer to notify", `#notify-enable[data-permission=default]`)
	page.run("grant notifications", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted, Origin: "http://" + s.Addr})
		return err
	}), chromedp.Click(`#notify-enable`))
	page.run("the offer gone once granted", chromedp.WaitNotVisible(`#notify-enable`))

	page.run("create a session", chromedp.SetValue(`#new-agent`, agentID), chromedp.SendKeys(`#new-workspace`, ws),
		chromedp.Click(`#create-session`), chromedp.WaitVisible(`#chat[data-live=true]`))
	// Headless Chromium's tab is always visible: the page is told it is hidden, and the
	// notifications it makes are recorded.
	page.run("hide the tab", chromedp.Evaluate[chromedp.Void](`
		Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'});
		window.__notes = [];
		window.Notification = class extends window.Notification {
			constructor(title, opts) { super(title, opts); window.__notes.push(title + ' | ' + opts.body); }
		};`))
	page.run("send", chromedp.SendKeys(`#message-input`, "configure"+kb.Enter))
	page.waitVisible("the form", `[data-testid=elicitation] input[name=port]`)
	// The notification names the session by its title ("configure", from the first
	// message) once the page's list has it, by its id before then.
	sessionID := get(page, "the session id", chromedp.AttributeValue(`#chat`, "data-session-id")).Value
	page.waitText("the notification", fmt.Sprintf(`window.__notes.map(n => n === %q || n === %q ? 'names the session' : n).join('\n')`,
		"agenticd: "+sessionID+" | Which port?", "agenticd: configure | Which port?"), "names the session")

	page.run("show the tab", chromedp.Evaluate[chromedp.Void](`delete document.visibilityState`))
	page.run("fill the form", chromedp.SendKeys(`[data-testid=elicitation] input[name=port]`, "8443"),
		chromedp.Click(`[data-testid=elicitation] input[name=tls]`), chromedp.SetValue(`[data-testid=elicitation] select[name=env]`, "prod"),
		chromedp.Click(`[data-testid=elicitation] [data-action=accept]`))
	page.waitText("the agent's answer", assistantTextJS, `elicitation: accept {"env":"prod","port":8443,"tls":true}`)
	if n := page.count(`[data-testid=elicitation]`); n != 0 {
		t.Errorf("%d forms still shown after the answer", n)
	}
}

// freeAddr is a loopback address nothing listens on now, so that a restarted server can
// come back where the page looks for it.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// The page notices a server that went away, keeps a message sent meanwhile visibly
// waiting, finds the server within a second of its return, clears its banner and sends
// the message once.
func TestBrowserReconnectsAfterRestart(t *testing.T) {
	browserPath := chromiumOrSkip(t)
	root, ws := workspaceUnder(t)
	const agentID = "acp.test.restart"
	s := startServer(t, daemon.Config{Listen: freeAddr(t), WorkspaceRoots: []string{root},
		Agents: []daemon.AgentConfig{scriptedAgent(t, agentID, `{"turns": [[{"text": "Got it."}, {"stop": "end_turn"}]]}`)}})
	page := &pageDriver{t: t, ctx: startBrowser(t, browserPath)}

	page.run("sign in", chromedp.Navigate(signInLink(t, s)), chromedp.WaitVisible(fmt.Sprintf(`[data-testid=agent][data-agent-id=%q]`, agentID)))
	page.run("create a session", chromedp.SetValue(`#new-agent`, agentID), chromedp.SendKeys(`#new-workspace`, ws),
		chromedp.Click(`#create-session`), chromedp.WaitVisible(`#chat[data-live=true]`))
	sessionID := get(page, "read the session id", chromedp.AttributeValue(`#chat`, "data-session-id")).Value

	s.Stop()
	page.waitVisible("the lost-server banner", `[data-testid=offline-banner]`)
	page.run("send while the server is away", chromedp.SendKeys(`#message-input`, "while away"+kb.Enter))
	page.waitVisible("the message waiting", `[data-testid=outbox-item]`)
	if text := page.eval(`document.querySelector('[data-testid=outbox-item] .outbox-text').textContent`); text != "while away" {
		t.Errorf("the waiting message reads %q", text)
	}
	// Enough failed tries that a growing back-off would wait several seconds now.
	page.waitText("several tries", `String(Number(document.getElementById('offline').dataset.attempts) >= 8)`, "true")

	s.start(t)
	back := time.Now()
	page.run("the banner cleared", chromedp.WaitNotVisible(`[data-testid=offline-banner]`))
	took := time.Since(back)
	// How soon is a figure, not an assertion: the page's retries are at most 800 ms apart
	// (connection.ts), and the test above makes sure it had backed off as far as it goes.
	t.Logf("the page was back %v after the server", took)
	page.waitText("the waiting message sent", `String(document.querySelectorAll('[data-testid=outbox-item]').length)`, "0")
	page.waitText("the reply", assistantTextJS, "Got it.")
	page.waitText("the message shown once", `[...document.querySelectorAll('[data-role=user] [data-testid=text]')].map(e => e.textContent).join('|')`, "while away")
	msgs, err := s.Client.ListMessages(context.Background(), &agenticv1.ListMessagesRequest{SessionId: sessionID})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, m := range msgs.GetMessages() {
		if m.GetRole() == agenticv1.MessageRole_MESSAGE_ROLE_USER {
			users = append(users, m.GetBlocks()[0].GetText().GetText())
		}
	}
	if strings.Join(users, "|") != "while away" {
		t.Errorf("the server has the user's messages %q; want %q once", users, "while away")
	}
}
