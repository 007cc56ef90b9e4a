package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The page's audit trail marks a command whose permission was denied as denied (it never
// ran), and only that one: an allowed command shows its exit status. A reloaded page
// names who sent the stored messages.
func TestBrowserAuditMarksADeniedCommand(t *testing.T) {
	browserPath := chromiumOrSkip(t)
	s, llm, ws := startDeepChat(t)
	if err := os.MkdirAll(filepath.Join(ws, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	llm.script(dcTools(dcCall{"call_echo", "run_command", `{"command":"echo hi"}`}), dcTools(dcCall{"call_rm", "run_command", `{"command":"rm -rf build"}`}),
		dcText("Kept build."))
	page := &pageDriver{t: t, ctx: startBrowser(t, browserPath)}
	page.run("sign in", chromedp.Navigate(signInLink(t, s)), chromedp.WaitVisible(fmt.Sprintf(`[data-testid=agent][data-agent-id=%q]`, dcAgent)))
	page.run("create a session", chromedp.SetValue(`#new-agent`, dcAgent), chromedp.SendKeys(`#new-workspace`, ws),
		chromedp.Click(`#create-session`), chromedp.WaitVisible(`#chat[data-live=true]`))
	page.run("send", chromedp.SendKeys(`#message-input`, "tidy up"+kb.Enter))
	page.waitText("the first command's request", `document.querySelector('[data-testid=permission]')?.textContent.includes('echo hi') ? 'yes' : ''`, "yes")
	page.run("allow it", chromedp.Click(`[data-testid=permission] [data-option-kind=allow_once]`))
	page.waitText("the second command's request", `document.querySelector('[data-testid=permission]')?.textContent.includes('rm -rf build') ? 'yes' : ''`, "yes")
	page.run("reject it", chromedp.Click(`[data-testid=permission] [data-option-kind=reject_once]`))
	page.waitVisible("the turn's end", `[data-role=assistant][data-state=complete]`)

	page.run("open the audit trail", chromedp.Click(`#audit summary`))
	page.waitText("two command entries", `String(document.querySelectorAll('[data-testid=audit-entry][data-kind=command]').length)`, "2")
	const entries = `[...document.querySelectorAll('[data-testid=audit-entry][data-kind=command]')]`
	denied := page.eval(entries + `.filter(e => e.hasAttribute('data-denied')).map(e => e.querySelector('.audit-summary').textContent + ' | ' + (e.querySelector('[data-testid=audit-denied]')?.textContent ?? '')).join(';')`)
	if want := "$ rm -rf build: denied, it never ran | denied"; denied != want {
		t.Errorf("the denied command's entry reads %q, want %q", denied, want)
	}
	allowed := page.eval(entries + `.filter(e => !e.hasAttribute('data-denied')).map(e => e.querySelector('.audit-summary').textContent).join(';')`)
	if want := "$ echo hi (exit 0)"; allowed != want {
		t.Errorf("the allowed command's entry reads %q, want %q", allowed, want)
	}
	if _, err := os.Stat(filepath.Join(ws, "build")); err != nil {
		t.Errorf("the denied command ran: %v", err)
	}

	// Drawn again from the stored history (ListMessages), the message still names its
	// sender.
	page.run("reload", chromedp.Reload(), chromedp.WaitVisible(`#chat[data-live=true]`))
	page.waitText("the sender of the stored message", `document.querySelector('[data-role=user]')?.dataset.sender ?? ''`, "owner")
}
