package acp

import (
	"reflect"
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/textutil"
	"github.com/agenticd/agenticd/sandbox"
)

// terminalPollEvery is how often the output of terminals shown by running tool calls
// is re-read and, when it changed, sent as TOOL_RUNNING (ACP has no output events:
// the agent only says which terminal a tool call shows).
const terminalPollEvery = 250 * time.Millisecond

// liveTerminalTail bounds the terminal output a live event (TOOL_START, TOOL_RUNNING)
// carries: a terminal may keep megabytes, re-sent every poll into every subscriber's
// event buffer. The stored message and TOOL_END carry the whole output.
const liveTerminalTail = 64 << 10

// terminalCompareTail is how much of a truncated output's end is compared to tell a
// change when the kept length stays at the byte limit.
const terminalCompareTail = 4 << 10

// sessionTerminals is what a session knows of its terminals. It does not know the
// session: the session's normalizer reads it as its terminalReader, under the
// session's lock like everything else here.
type sessionTerminals struct {
	live     *sandbox.Terminals                  // nil while the session is not live
	commands map[string]string                   // terminal id -> command line
	final    map[string]presenters.TerminalBlock // last state of released terminals
}

func newSessionTerminals(live *sandbox.Terminals) sessionTerminals {
	return sessionTerminals{live: live, commands: map[string]string{}, final: map[string]presenters.TerminalBlock{}}
}

// terminalBlock is a terminal's current state for tool content.
func (t *sessionTerminals) terminalBlock(id string) (presenters.TerminalBlock, bool) {
	if final, ok := t.final[id]; ok {
		return final, true
	}
	if t.live == nil {
		return presenters.TerminalBlock{}, false
	}
	out, err := t.live.Output(id)
	if err != nil {
		return presenters.TerminalBlock{}, false
	}
	return t.terminalState(id, out.Output, out.Truncated, out.Exit)
}

// terminalState builds a terminal's block from its output.
func (t *sessionTerminals) terminalState(id, output string, truncated bool, exit *sandbox.ExitStatus) (presenters.TerminalBlock, bool) {
	b := presenters.TerminalBlock{TerminalID: id, Command: t.commands[id], Output: output, Truncated: truncated}
	if exit != nil {
		b.ExitCode, b.Signal = exit.Code, exit.Signal
	}
	return b, true
}

// terminalCreated remembers a terminal's command line for the blocks that show it.
func (s *session) terminalCreated(id, command string, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.terminals.commands[id] = strings.Join(append([]string{command}, args...), " ")
}

// terminalReleasing keeps a terminal's last state: tool calls keep showing it after
// the agent released it.
func (s *session) terminalReleasing(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.terminals.terminalBlock(id)
	if !ok {
		return
	}
	s.terminals.final[id] = b
	s.norm.applyTerminals(map[string]presenters.TerminalBlock{id: b}, s.emitPayload)
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
		if !s.pollTerminals() {
			return
		}
	}
}

// pollTerminals re-reads the shown terminals once and reports whether any is still
// live; when none is, following ends. The output is read without s.mu: a terminal
// may keep megabytes, and the copy must not stall the session's updates.
func (s *session) pollTerminals() bool {
	s.mu.Lock()
	ids, terms := s.norm.liveTerminalIDs(), s.terminals.live
	if len(ids) == 0 || terms == nil {
		s.following = false
		s.mu.Unlock()
		return false
	}
	s.mu.Unlock()

	type read struct {
		id  string
		out sandbox.TerminalOutput
	}
	reads := make([]read, 0, len(ids))
	for _, id := range ids {
		if out, err := terms.Output(id); err == nil {
			reads = append(reads, read{id, out})
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	states := make(map[string]presenters.TerminalBlock, len(reads))
	for _, r := range reads {
		if final, ok := s.terminals.final[r.id]; ok {
			// Released while we read: its kept final state wins.
			states[r.id] = final
			continue
		}
		states[r.id], _ = s.terminals.terminalState(r.id, r.out.Output, r.out.Truncated, r.out.Exit)
	}
	if !s.norm.applyTerminals(states, s.emitPayload) {
		s.following = false
		return false
	}
	return true
}

// sameTerminal reports whether two states of a terminal look the same, without
// comparing whole outputs: the kept output only grows until it reaches the byte limit,
// so its length tells a change, and once truncated its last bytes do.
func sameTerminal(a, b presenters.TerminalBlock) bool {
	if a.TerminalID != b.TerminalID || a.Command != b.Command || len(a.Output) != len(b.Output) ||
		a.Truncated != b.Truncated || a.Signal != b.Signal || !sameExitCode(a.ExitCode, b.ExitCode) {
		return false
	}
	return !a.Truncated || textutil.Suffix(a.Output, terminalCompareTail) == textutil.Suffix(b.Output, terminalCompareTail)
}

func sameExitCode(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// sameToolCall reports whether an update left a tool call as it was; terminal
// contents are compared as sameTerminal does.
func sameToolCall(a, b presenters.ToolCall) bool {
	if len(a.Content) != len(b.Content) {
		return false
	}
	for i := range a.Content {
		ta, tb := a.Content[i].Terminal, b.Content[i].Terminal
		switch {
		case ta != nil && tb != nil:
			if !sameTerminal(*ta, *tb) {
				return false
			}
		case !reflect.DeepEqual(a.Content[i], b.Content[i]):
			return false
		}
	}
	a.Content, b.Content = nil, nil
	return reflect.DeepEqual(a, b)
}

// liveView is call as a live event carries it: terminal outputs cut to their last
// liveTerminalTail bytes. The tail is cloned so the event does not keep the whole
// output's memory alive in the event buffers.
func liveView(call presenters.ToolCall) presenters.ToolCall {
	cut := false
	for i, c := range call.Content {
		if c.Terminal == nil || len(c.Terminal.Output) <= liveTerminalTail {
			continue
		}
		if !cut {
			call.Content = append([]presenters.ToolContent(nil), call.Content...)
			cut = true
		}
		tb := *c.Terminal
		tb.Output, tb.Truncated = strings.Clone(textutil.Suffix(tb.Output, liveTerminalTail)), true
		call.Content[i] = presenters.ToolContent{Terminal: &tb}
	}
	return call
}
