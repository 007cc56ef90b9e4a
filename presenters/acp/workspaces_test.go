package acp

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// pidsByWorkspace are the agent processes running now, by workspace root.
func pidsByWorkspace(p *Presenter) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for ws, c := range p.conns {
		out[ws] = c.proc.Pid()
	}
	return out
}

// A process can be confined to one workspace only: sessions share a process when they
// share a workspace, and a session in another workspace gets a process of its own,
// started in that workspace.
func TestAgentProcessPerWorkspace(t *testing.T) {
	h := newHarness(t)
	other := filepath.Join(filepath.Dir(h.ws), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	p := h.presenter(h.config(`{}`))
	a := h.create(p)
	b := h.create(p)
	c, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(other)})
	if err != nil {
		t.Fatal(err)
	}
	pids := pidsByWorkspace(p)
	if len(pids) != 2 || pids[a.Workspace] == 0 || pids[c.Workspace] == 0 || pids[a.Workspace] == pids[c.Workspace] {
		t.Fatalf("processes by workspace %v; want one for %s (sessions %s, %s) and one for %s", pids, a.Workspace, a.SessionID, b.SessionID, c.Workspace)
	}
	for ws, pid := range pids {
		cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
		if err != nil || cwd != ws {
			t.Errorf("agent for %s runs in %q (%v)", ws, cwd, err)
		}
	}
}

// A workspace's process with no open session stops after the idle timeout; the others
// stay, and the next session there starts a new one.
func TestIdleAgentProcessStops(t *testing.T) {
	h := newHarness(t)
	other := filepath.Join(filepath.Dir(h.ws), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := h.config(`{}`)
	cfg.IdleTimeout = time.Nanosecond
	p := h.presenter(cfg)
	kept, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: h.opened(other)})
	if err != nil {
		t.Fatal(err)
	}
	closed := h.create(p)
	idlePID := pidsByWorkspace(p)[closed.Workspace]
	if err := p.CloseSession(testContext(t), closed.SessionID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for alive(idlePID) {
		if time.Now().After(deadline) {
			t.Fatalf("the idle agent process %d still runs", idlePID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pids := pidsByWorkspace(p)
	if _, ok := pids[closed.Workspace]; ok || pids[kept.Workspace] == 0 {
		t.Fatalf("after the idle stop: processes %v; want only %s's", pids, kept.Workspace)
	}
	if d := p.Describe(testContext(t)); d.Status == presenters.AgentCrashed {
		t.Fatalf("an idle stop counted as a crash: %+v", d)
	}
	again := h.create(p)
	if pid := pidsByWorkspace(p)[again.Workspace]; pid == 0 || pid == idlePID {
		t.Fatalf("a new session in the idle workspace got process %d (the stopped one was %d)", pid, idlePID)
	}
}

// CreateSession works in the workspace the service opened and resolves no path itself:
// here the presenter's own roots would refuse the directory, yet the agent runs there.
// Reopening the session after a restart opens the stored directory again, so it is
// refused then, with ErrFailedPrecondition naming the session and the directory.
func TestSessionUsesTheWorkspaceItIsGiven(t *testing.T) {
	h := newHarness(t)
	elsewhere, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	serviceRoots, err := sandbox.NewRoots([]string{elsewhere}, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := serviceRoots.Open(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.config(`{"agent": {"loadSession": true}}`)
	p := h.presenter(cfg)
	s, err := p.CreateSession(testContext(t), presenters.SessionConfig{Workspace: ws})
	if err != nil {
		t.Fatalf("CreateSession with a workspace the service opened: %v", err)
	}
	if s.Workspace != elsewhere || pidsByWorkspace(p)[elsewhere] == 0 {
		t.Fatalf("session in %q, processes %v; want an agent in %s", s.Workspace, pidsByWorkspace(p), elsewhere)
	}

	p = h.restart(p, cfg)
	_, err = p.LoadSession(testContext(t), s.SessionID, presenters.LoadContext{})
	if !errors.Is(err, presenters.ErrFailedPrecondition) {
		t.Fatalf("LoadSession of a session outside the roots: %v, want ErrFailedPrecondition", err)
	}
	for _, want := range []string{s.SessionID, elsewhere, "not under any workspace root"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("LoadSession error %q should mention %q", err, want)
		}
	}
	if pids := pidsByWorkspace(p); len(pids) != 0 {
		t.Errorf("a refused reopening started agents: %v", pids)
	}
}
