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
// carries: a terminal may keep megabytes, and a burst between two polls may be as
// large. The stored message and TOOL_END carry all that is held.
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
	// applied counts the reads of each terminal's output applied so far: a read older
	// than the last applied one is not.
	applied map[string]uint64
}

func newSessionTerminals(live *sandbox.Terminals) sessionTerminals {
	return sessionTerminals{live: live, commands: map[string]string{}, final: map[string]presenters.TerminalBlock{},
		applied: map[string]uint64{}}
}

// reads is how many reads of a terminal were applied so far.
func (t *sessionTerminals) reads(id string) uint64 { return t.applied[id] }

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
	return t.terminalState(id, out)
}

// terminalState builds a terminal's block from a read of its output, the newest one.
func (t *sessionTerminals) terminalState(id string, out sandbox.TerminalOutput) (presenters.TerminalBlock, bool) {
	t.applied[id]++
	b := presenters.TerminalBlock{TerminalID: id, Command: t.commands[id], Output: out.Output, Truncated: out.Truncated, OutputOffset: out.Offset}
	if exit := out.Exit; exit != nil {
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
	reads := make(map[string]uint64, len(ids))
	for _, id := range ids {
		reads[id] = s.terminals.reads(id)
	}
	s.mu.Unlock()

	type read struct {
		id  string
		out sandbox.TerminalOutput
	}
	outputs := make([]read, 0, len(ids))
	for _, id := range ids {
		if out, err := terms.Output(id); err == nil {
			outputs = append(outputs, read{id, out})
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	states := make(map[string]presenters.TerminalBlock, len(outputs))
	for _, r := range outputs {
		if final, ok := s.terminals.final[r.id]; ok {
			// Released while we read: its kept final state wins.
			states[r.id] = final
			continue
		}
		if s.terminals.reads(r.id) != reads[r.id] {
			continue // read again meanwhile, under the lock: this read is older
		}
		states[r.id], _ = s.terminals.terminalState(r.id, r.out)
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
	if a.TerminalID != b.TerminalID || a.Command != b.Command || len(a.Output) != len(b.Output) || a.OutputOffset != b.OutputOffset ||
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

// liveView is the tool call as a live event carries it. TOOL_START (running false)
// carries each terminal's held output, TOOL_RUNNING only the output after what the
// call's previous events carried; both from the offset where it starts and cut to its
// last liveTerminalTail bytes. It records what was carried. The cut output is cloned so
// the event does not keep the whole output's memory alive in the event buffers.
func (st *toolState) liveView(running bool) presenters.ToolCall {
	call := st.call
	copied := false
	for i, c := range call.Content {
		if c.Terminal == nil {
			continue
		}
		tb := *c.Terminal
		end := tb.OutputOffset + uint64(len(tb.Output))
		if sent, ok := st.sent[tb.TerminalID]; running && ok && sent > tb.OutputOffset {
			skip := min(sent, end) - tb.OutputOffset
			tb.Output, tb.OutputOffset = tb.Output[skip:], tb.OutputOffset+skip
		}
		if len(tb.Output) > liveTerminalTail {
			tail := textutil.Suffix(tb.Output, liveTerminalTail)
			tb.OutputOffset += uint64(len(tb.Output) - len(tail))
			tb.Output, tb.Truncated = strings.Clone(tail), true
		}
		if st.sent == nil {
			st.sent = map[string]uint64{}
		}
		st.sent[tb.TerminalID] = end
		if !copied {
			// Content slices are shared with snapshots and events: copy, never mutate.
			call.Content = append([]presenters.ToolContent(nil), call.Content...)
			copied = true
		}
		call.Content[i] = presenters.ToolContent{Terminal: &tb}
	}
	return call
}
