package acp

import (
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// terminalPollEvery is how often the output of terminals shown by running tool calls
// is re-read and, when it changed, sent as TOOL_RUNNING (ACP has no output events:
// the agent only says which terminal a tool call shows).
const terminalPollEvery = 250 * time.Millisecond

// terminalBlock is a terminal's current state for tool content (s.mu held; called by
// the normalizer).
func (s *session) terminalBlock(id string) (presenters.TerminalBlock, bool) {
	if final, ok := s.termFinal[id]; ok {
		return final, true
	}
	if s.terms == nil {
		return presenters.TerminalBlock{}, false
	}
	out, err := s.terms.Output(id)
	if err != nil {
		return presenters.TerminalBlock{}, false
	}
	b := presenters.TerminalBlock{TerminalID: id, Command: s.termCommands[id], Output: out.Output, Truncated: out.Truncated}
	if out.Exit != nil {
		b.ExitCode, b.Signal = out.Exit.Code, out.Exit.Signal
	}
	return b, true
}

// terminalCreated remembers a terminal's command line for the blocks that show it.
func (s *session) terminalCreated(id, command string, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.termCommands[id] = strings.Join(append([]string{command}, args...), " ")
}

// terminalReleasing keeps a terminal's last state: tool calls keep showing it after
// the agent released it.
func (s *session) terminalReleasing(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.terminalBlock(id); ok {
		s.termFinal[id] = b
	}
	s.norm.refreshTerminals(s.emitPayload)
}

// startFollowing starts the goroutine that re-reads shown terminals (s.mu held).
func (s *session) startFollowing() {
	select {
	case <-s.p.closing:
		return
	default:
	}
	s.following = true
	s.p.wg.Add(1)
	go s.follow()
}

func (s *session) follow() {
	defer s.p.wg.Done()
	t := time.NewTicker(terminalPollEvery)
	defer t.Stop()
	for {
		select {
		case <-s.p.closing:
			s.mu.Lock()
			s.following = false
			s.mu.Unlock()
			return
		case <-t.C:
		}
		s.mu.Lock()
		live := s.norm.refreshTerminals(s.emitPayload)
		if !live {
			s.following = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}
