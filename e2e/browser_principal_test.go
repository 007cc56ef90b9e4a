package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// gateScript asks for permission once in its turn, then ends it.
const gateScript = `{
 "agent": {"loadSession": false},
 "turns": [[
 {"update": {"sessionUpdate": "tool_call", "toolCallId": "gate", "title": "Gate", "kind": "other", "status": "pending"}},
 {"permission": {"toolCall": {"toolCallId": "gate"}, "onAllow": [{"text": "through the gate"}]}},
 {"stop": "end_turn"}
 ]]}`

// A page signed in as a principal says who is signed in, and who sent each message,
// answered each permission request and did each audited act.
func TestBrowserShowsWhoIsSignedInAndWhoAnswered(t *testing.T) {
	browserPath := chromiumOrSkip(t)
	root, ws := workspaceUnder(t)
	const agentID = "acp.test.gate"
	const aliceToken = "alice-browser-token-0123456789"
	sum := sha256.Sum256([]byte(aliceToken))
	s := startServer(t, daemon.Config{WorkspaceRoots: []string{root}, Agents: []daemon.AgentConfig{scriptedAgent(t, agentID, gateScript)},
		Principals: []daemon.PrincipalConfig{{Name: "alice", TokenSHA256: hex.EncodeToString(sum[:]), Scopes: []string{"read", "write"}}}})
	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearerToken(aliceToken)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	login, err := agenticv1.NewAgenticServiceClient(conn).CreateWebLogin(context.Background(), &agenticv1.CreateWebLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	page := &pageDriver{t: t, ctx: startBrowser(t, browserPath)}
	page.run("sign in as alice", chromedp.Navigate("http://"+s.Addr+login.GetPath()), chromedp.WaitVisible(fmt.Sprintf(`[data-testid=agent][data-agent-id=%q]`, agentID)))
	page.waitText("who is signed in", `document.querySelector('[data-testid=signed-in]').textContent`, "signed in as alice")

	page.run("create a session", chromedp.SetValue(`#new-agent`, agentID), chromedp.SendKeys(`#new-workspace`, ws),
		chromedp.Click(`#create-session`), chromedp.WaitVisible(`#chat[data-live=true]`))
	page.run("send", chromedp.SendKeys(`#message-input`, "open it"+kb.Enter))
	page.waitVisible("the permission request", `[data-testid=permission]`)
	page.waitText("the sender of the message", `document.querySelector('[data-role=user]')?.dataset.sender ?? ''`, "alice")
	page.waitText("the sender's name on the message", `document.querySelector('[data-role=user] [data-testid=message-role]').textContent`, "alice (you)")
	page.run("allow", chromedp.Click(`[data-testid=permission] [data-option-kind=allow_once]`))
	page.waitVisible("the turn's end", `[data-role=assistant][data-state=complete]`)
	page.waitText("who allowed it", `String([...document.querySelectorAll('[data-role=assistant] .note')].some(n => n.textContent.startsWith('allowed by alice (you): ')))`, "true")

	page.run("open the audit trail", chromedp.Click(`#audit summary`))
	page.waitVisible("the decision in the audit trail", `[data-testid=audit-entry][data-kind=permission_decided]`)
	page.waitText("who decided, in the audit trail", `document.querySelector('[data-testid=audit-entry][data-kind=permission_decided] [data-testid=audit-principal]')?.textContent ?? ''`, "alice (you)")
	page.waitText("who created the session, in the audit trail", `document.querySelector('[data-testid=audit-entry][data-kind=session_created] [data-testid=audit-principal]')?.textContent ?? ''`, "alice (you)")
}
