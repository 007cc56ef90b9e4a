package acp

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/store"
)

// agentSaid counts the lines the test agent wrote to its stderr that contain text.
func (h *harness) agentSaid(text string) int {
	n := 0
	for _, l := range strings.Split(h.log.String(), "\n") {
		if strings.Contains(l, `msg="agent stderr"`) && strings.Contains(l, text) {
			n++
		}
	}
	return n
}

// waitAgentSaid waits until the test agent wrote n lines containing text to its stderr
// (logged as they come, after the request that caused them may have returned).
func (h *harness) waitAgentSaid(text string, n int) bool {
	deadline := time.Now().Add(waitLimit)
	for h.agentSaid(text) < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// DeleteSession ends a live session and has the agent delete its copy when it offers
// session/delete; agenticd's stored rows stay (the service deletes them). A stored
// session is deleted through a process started for it after a restart.
func TestDeleteSession(t *testing.T) {
	t.Run("agent offers session/delete", func(t *testing.T) {
		h := newHarness(t)
		cfg := h.config(`{"agent": {"delete": true}}`)
		p := h.presenter(cfg)
		live := h.create(p)
		if !live.Capabilities.SupportsDelete || !p.Describe(testContext(t)).Capabilities.SupportsDelete {
			t.Fatalf("capabilities %+v", live.Capabilities)
		}
		from := h.rec.len()
		if err := p.DeleteSession(testContext(t), live.SessionID); err != nil {
			t.Fatal(err)
		}
		if got := timeline(h.rec.eventsOf(live.SessionID, from), nil); !slices.Contains(got, "SESSION_CLOSED") {
			t.Fatalf("events of the deleted session %q: it was not ended", got)
		}
		if !h.waitAgentSaid("session/delete "+live.AgentSessionID, 1) {
			t.Fatal("the agent was not asked to delete its copy")
		}
		if _, err := h.store.GetConversation(testContext(t), live.SessionID); err != nil {
			t.Fatalf("the stored session is the service's to delete: %v", err)
		}

		stored := h.create(p)
		if err := p.CloseSession(testContext(t), stored.SessionID); err != nil {
			t.Fatal(err)
		}
		p = h.restart(p, cfg)
		if err := p.DeleteSession(testContext(t), stored.SessionID); err != nil {
			t.Fatal(err)
		}
		if !h.waitAgentSaid("session/delete "+stored.AgentSessionID, 1) {
			t.Fatal("a stored session's agent copy was not deleted after a restart")
		}
		if err := p.DeleteSession(testContext(t), "no-such-session"); !errors.Is(err, presenters.ErrNotFound) {
			t.Fatalf("unknown session: %v", err)
		}
	})
	t.Run("agent without session/delete", func(t *testing.T) {
		h := newHarness(t)
		p := h.presenter(h.config(`{}`))
		s := h.create(p)
		if s.Capabilities.SupportsDelete {
			t.Fatalf("capabilities %+v", s.Capabilities)
		}
		if err := p.DeleteSession(testContext(t), s.SessionID); err != nil {
			t.Fatal(err)
		}
		if info, _ := p.GetSession(testContext(t), s.SessionID); info.Status != presenters.SessionClosed {
			t.Fatalf("status %s after DeleteSession", info.Status)
		}
		closePresenter(t, p) // its stderr is all logged then
		if h.agentSaid("session/delete") > 0 {
			t.Fatal("session/delete sent to an agent that does not offer it")
		}
	})
}

// Logout reaches the agent's logout in its running process, or in one started for it;
// an agent that does not offer logout is ErrUnsupported.
func TestLogout(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"agent": {"logout": true}}`))
	if err := p.Logout(testContext(t)); err != nil {
		t.Fatalf("Logout with no process running: %v", err)
	}
	if !h.waitAgentSaid("testagent: logout", 1) {
		t.Fatal("the agent was not asked to log out")
	}
	p.mu.Lock()
	left := len(p.conns)
	p.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d processes left after a logout with none running", left)
	}
	if !p.Describe(testContext(t)).Capabilities.SupportsLogout {
		t.Fatal("SupportsLogout is not set")
	}
	s := h.create(p)
	if err := p.Logout(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if !h.waitAgentSaid("testagent: logout", 2) {
		t.Fatal("the running process was not logged out")
	}
	if info, _ := p.GetSession(testContext(t), s.SessionID); info.Status != presenters.SessionIdle {
		t.Fatalf("session status %s after logout", info.Status)
	}

	h2 := newHarness(t)
	p2 := h2.presenter(h2.config(`{}`))
	if err := p2.Logout(testContext(t)); !errors.Is(err, presenters.ErrUnsupported) {
		t.Fatalf("Logout of an agent without logout: %v, want ErrUnsupported", err)
	}
	h2.create(p2)
	if err := p2.Logout(testContext(t)); !errors.Is(err, presenters.ErrUnsupported) || p2.Describe(testContext(t)).Capabilities.SupportsLogout {
		t.Fatalf("Logout of a started agent without logout: %v", err)
	}
}

// createOwned creates a session and records its owner, as the service does.
func (h *harness) createOwned(p *Presenter) presenters.SessionInfo {
	h.t.Helper()
	info := h.create(p)
	if err := h.store.AddSessionOwner(testContext(h.t), store.SessionOwner{SessionID: info.SessionID, AgentID: info.AgentID,
		Workspace: info.Workspace, CreatedUnixNano: info.CreatedAt.UnixNano()}); err != nil {
		h.t.Fatal(err)
	}
	return info
}

// storedSessions are the agent's sessions as the service's ListSessions reads them: by
// agent session id, with their titles.
func (h *harness) storedSessions(agentID string) map[string]store.Conversation {
	h.t.Helper()
	listed, err := h.store.ListSessions(testContext(h.t), store.SessionFilter{AgentID: agentID}, 100, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]store.Conversation{}
	for _, l := range listed {
		c, err := h.store.GetConversation(testContext(h.t), l.SessionID)
		if err != nil {
			h.t.Fatalf("listed session %s has no conversation: %v", l.SessionID, err)
		}
		if _, dup := out[c.AgentSessionID]; dup {
			h.t.Fatalf("agent session %s recorded twice", c.AgentSessionID)
		}
		out[c.AgentSessionID] = c
	}
	return out
}

// With import_sessions, the agent's own sessions of a workspace (session/list, read
// page by page) are recorded when a process starts there, once each, so that
// ListSessions shows them; LoadSession opens one with session/load.
func TestImportSessions(t *testing.T) {
	h := newHarness(t)
	script := `{"agent": {"list": true, "loadSession": true, "pageSize": 1},
	  "sessions": [
	    {"sessionId": "earlier-1", "cwd": "{cwd}", "title": "Earlier work", "updatedAt": "2026-01-02T03:04:05Z"},
	    {"sessionId": "earlier-2", "cwd": "{cwd}"},
	    {"sessionId": "elsewhere", "cwd": "/somewhere/else"}],
	  "load": [{"text": "from before"}]}`
	cfg := h.config(script)
	cfg.ImportSessions = true
	p := h.presenter(cfg)
	own := h.createOwned(p)
	if !own.Capabilities.SupportsSessionList {
		t.Fatalf("capabilities %+v", own.Capabilities)
	}
	// The process has its own session listed now: a restart must not import it again.
	p = h.restart(p, cfg)
	h.createOwned(p)
	got := h.storedSessions(cfg.ID)
	if len(got) != 4 || got["earlier-2"].ID == "" || got[own.AgentSessionID].ID != own.SessionID {
		t.Fatalf("stored sessions %v; want earlier-1, earlier-2 and the two created here, once each", got)
	}
	earlier := got["earlier-1"]
	if earlier.Title != "Earlier work" || earlier.Workspace != h.ws || !earlier.UpdatedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("imported session %+v", earlier)
	}
	if _, ok := got["elsewhere"]; ok {
		t.Fatal("a session of another directory was imported")
	}
	info, err := p.LoadSession(testContext(t), earlier.ID, presenters.LoadContext{})
	if err != nil {
		t.Fatal(err)
	}
	if info.AgentSessionID != "earlier-1" || info.Status != presenters.SessionIdle || !h.waitAgentSaid("session earlier-1 setup", 1) {
		t.Fatalf("loaded imported session %+v", info)
	}

	h2 := newHarness(t)
	off := h2.config(script)
	p2 := h2.presenter(off)
	s := h2.createOwned(p2)
	if got := h2.storedSessions(off.ID); len(got) != 1 || s.Capabilities.SupportsSessionList {
		t.Fatalf("without import_sessions: stored %v, capabilities %+v", got, s.Capabilities)
	}
	closePresenter(t, p2)
	if h2.agentSaid("session/list") > 0 {
		t.Fatal("session/list was called without import_sessions")
	}
}

// A session whose conversation is stored but whose owner the service has not recorded
// yet (CreateSession on another process of the workspace has just returned) is known:
// a process starting then does not import it a second time.
func TestImportSessionsSkipsSessionsStoredWithoutOwner(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(`{"agent": {"list": true, "loadSession": true},
	  "sessions": [{"sessionId": "being-created", "cwd": "{cwd}"}, {"sessionId": "earlier", "cwd": "{cwd}"}]}`)
	cfg.ImportSessions = true
	if err := h.store.CreateConversation(testContext(t), store.Conversation{ID: "created-elsewhere", AgentID: cfg.ID,
		AgentSessionID: "being-created", Workspace: h.ws}); err != nil {
		t.Fatal(err)
	}
	p := h.presenter(cfg)
	h.createOwned(p)
	got := h.storedSessions(cfg.ID)
	if _, ok := got["being-created"]; ok || got["earlier"].ID == "" || len(got) != 2 {
		t.Fatalf("stored sessions %v; want earlier imported, being-created not, and the one created here", got)
	}
}
