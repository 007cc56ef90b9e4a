package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// queueScript's first turn runs until it is cancelled; later ones answer at once.
const queueScript = `{"turns": [
 [{"text": "Working."}, {"waitCancel": true}, {"stop": "cancelled"}],
 [{"text": "Next turn."}]]}`

// While a turn runs, the page sends with the delivery mode chosen by the send button,
// shows the session's queue (with why a message waits), and takes a queued message out.
func TestBrowserDeliveryModesAndQueue(t *testing.T) {
	browserPath := chromiumOrSkip(t)
	root, ws := workspaceUnder(t)
	const agentID = "acp.test.queue"
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, agentID, queueScript)}})
	page := &pageDriver{t: t, ctx: startBrowser(t, browserPath)}
	page.run("sign in", chromedp.Navigate(signInLink(t, s)), chromedp.WaitVisible(fmt.Sprintf(`[data-testid=agent][data-agent-id=%q]`, agentID)))
	page.run("create a session", chromedp.SetValue(`#new-agent`, agentID), chromedp.SendKeys(`#new-workspace`, ws),
		chromedp.Click(`#create-session`), chromedp.WaitVisible(`#chat[data-live=true]`))
	sessionID := get(page, "read the session id", chromedp.AttributeValue(`#chat`, "data-session-id")).Value

	page.run("start a turn", chromedp.SendKeys(`#message-input`, "start"+kb.Enter))
	page.waitText("the turn's first words", `String(document.getElementById('messages').textContent.includes('Working.'))`, "true")

	// Steer, to an agent that takes none: queued, saying why. (chromedp's Enter also
	// types a line end into the emptied box: texts are compared trimmed.)
	page.run("steer a message", chromedp.SetValue(`#delivery`, "steer"), chromedp.SendKeys(`#message-input`, "use tabs"+kb.Enter))
	page.waitVisible("the steered message, queued", `[data-testid=queued-message]`)
	if text := page.eval(`document.querySelector('[data-testid=queued-message]').textContent`); !strings.Contains(text, "use tabs") ||
		!strings.Contains(text, "takes no steering") {
		t.Errorf("the steered message reads %q; want its text and why it waits", text)
	}
	// Queued: listed after it, with its text.
	page.run("queue a message", chromedp.SetValue(`#delivery`, "queue"), chromedp.SendKeys(`#message-input`, "later please"+kb.Enter))
	page.waitText("two queued messages", `String(document.querySelectorAll('[data-testid=queued-message]').length)`, "2")
	if text := page.eval(`document.querySelectorAll('[data-testid=queued-message] .queued-text')[1].textContent.trim()`); text != "later please" {
		t.Errorf("the queued message reads %q", text)
	}

	// Remove takes the first out of the queue, on the server too.
	page.run("remove the first", chromedp.Click(`[data-testid=queued-message]:first-child [data-testid=queued-remove]`))
	page.waitText("one queued message", `String(document.querySelectorAll('[data-testid=queued-message]').length)`, "1")
	waitSession(t, s, sessionID, "the queue without the removed message", func(si *agenticv1.SessionInfo) bool {
		q := si.GetQueuedMessages()
		return len(q) == 1 && strings.TrimSpace(q[0].GetContent().GetParts()[0].GetText()) == "later please"
	})

	// Interrupt stops the turn and sends at once, ahead of the queue.
	page.run("interrupt", chromedp.SetValue(`#delivery`, "interrupt"), chromedp.SendKeys(`#message-input`, "stop that"+kb.Enter))
	page.waitVisible("the cancelled turn", `[data-role=assistant][data-state=cancelled]`)
	page.waitText("the queue emptied as its message ran", `String(document.querySelectorAll('[data-testid=queued-message]').length)`, "0")
}
