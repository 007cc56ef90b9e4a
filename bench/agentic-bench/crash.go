package main

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// crashRun is one kill -9 of agenticd mid-reply and its restart on the same data dir.
type crashRun struct {
	seen  int  // events of the reply a live subscriber got before the kill
	lost  int  // of those, how many the restarted server's log no longer has
	ended bool // the resumed stream ended the reply: ERROR(SERVER_RESTARTED), MESSAGE_END(INTERRUPTED)
	err   error
}

func (r crashRun) String() string {
	if r.err != nil {
		return "crash: " + oneLine(r.err.Error())
	}
	return fmt.Sprintf("crash: %d of %d events seen lost, reply ended after restart: %v", r.lost, r.seen, r.ended)
}

// crashRun streams a paced reply to one subscriber (unmerged deltas, so that each
// sequence it sees is an event of the log), kills agenticd once the subscriber has seen
// killAfter chunks, restarts it on the same data dir, and resumes from before the turn:
// what the subscriber saw and the log lacks was lost, and the replay must end the reply.
func (c *common) crashRun(ctx context.Context, rate float64, killAfter int) crashRun {
	if c.agenticd == "" {
		return crashRun{err: errors.New("a kill -9 needs agenticd in its own process: leave -inprocess out")}
	}
	dataDir, workspace, err := c.runDir("eventlog-crash")
	if err != nil {
		return crashRun{err: err}
	}
	// The reply runs far longer than the kill takes to come.
	cfg := acpConfig(dataDir, workspace, c.agent, floodEnv(killAfter*100, 64, rate), nil)
	s, err := startAgenticd(ctx, c.agenticd, cfg)
	if err != nil {
		return crashRun{err: err}
	}
	killed := false
	defer func() {
		if !killed {
			s.stop()
		}
	}()
	created, err := s.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: benchACPAgent, Config: &pb.SessionConfig{Workspace: workspace}})
	if err != nil {
		return crashRun{err: fmt.Errorf("CreateSession: %w", err)}
	}
	sessionID := created.GetSession().GetSessionId()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.client.Subscribe(sctx, &pb.SubscribeRequest{SessionIds: []string{sessionID}, UnmergedDeltas: true})
	if err != nil {
		return crashRun{err: fmt.Errorf("Subscribe: %w", err)}
	}
	if _, err := stream.Header(); err != nil {
		return crashRun{err: fmt.Errorf("Subscribe: %w", err)}
	}
	got, err := s.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: sessionID})
	if err != nil {
		return crashRun{err: fmt.Errorf("GetSession: %w", err)}
	}
	before := got.GetSession().GetLastSequence()
	if _, err := s.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: sessionID, Content: textContent("go")}); err != nil {
		return crashRun{err: fmt.Errorf("SendMessage: %w", err)}
	}
	seen := map[uint64]bool{}
	reply := ""
	events := &eventReader{stream: stream}
	for chunks := 0; chunks < killAfter; {
		ev, err := events.next()
		if err != nil {
			return crashRun{err: fmt.Errorf("the live stream before the kill: %w", err)}
		}
		d := ev.GetMessageDelta()
		if d == nil || d.GetRole() != pb.MessageRole_MESSAGE_ROLE_ASSISTANT {
			continue
		}
		reply = d.GetMessageId()
		seen[ev.GetSequence()] = true
		chunks++
	}
	// What else the stream had already brought counts as seen too.
	for _, ev := range events.pending {
		if ev.GetMessageDelta().GetMessageId() == reply {
			seen[ev.GetSequence()] = true
		}
	}
	killServer(s)
	killed = true
	cancel()

	again, err := startAgenticd(ctx, c.agenticd, cfg)
	if err != nil {
		return crashRun{err: fmt.Errorf("restart: %w", err)}
	}
	defer again.stop()
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	resumed, err := again.client.Subscribe(rctx, &pb.SubscribeRequest{SessionIds: []string{sessionID}, Start: after(before), UnmergedDeltas: true})
	if err != nil {
		return crashRun{err: fmt.Errorf("Subscribe after the restart: %w", err)}
	}
	out := crashRun{seen: len(seen)}
	logged := map[uint64]bool{}
	replay := &eventReader{stream: resumed}
	var sawError bool
	for {
		ev, err := replay.next()
		if err != nil {
			return crashRun{err: fmt.Errorf("the resumed stream: %w", err)}
		}
		logged[ev.GetSequence()] = true
		if e := ev.GetError(); e != nil && e.GetMessageId() == reply {
			sawError = e.GetReason() == pb.ErrorReason_ERROR_REASON_SERVER_RESTARTED
		}
		if end := ev.GetMessageEnd(); end != nil && end.GetMessageId() == reply {
			out.ended = sawError && end.GetStopReason() == pb.StopReason_STOP_REASON_INTERRUPTED
			break
		}
	}
	for seq := range seen {
		if !logged[seq] {
			out.lost++
		}
	}
	if !out.ended {
		out.err = errors.New("the resumed stream ended the reply without ERROR(SERVER_RESTARTED) before MESSAGE_END(INTERRUPTED)")
	}
	return out
}

// crashRows renders the crash runs' figures.
func crashRows(section, cmd string, rate float64, killAfter int, runs []crashRun) []Row {
	var lost, seen []float64
	var fails []string
	maxLost := 0
	for _, r := range runs {
		if r.err != nil {
			fails = append(fails, oneLine(r.err.Error()))
			continue
		}
		lost = append(lost, float64(r.lost))
		seen = append(seen, float64(r.seen))
		maxLost = max(maxLost, r.lost)
	}
	figure := fmt.Sprintf("events a subscriber saw that a kill -9 lost (reply paced at %s chunks/s, killed after %d)", si(rate), killAfter)
	done := fmt.Sprintf("%d of %d ended after the restart", len(lost), len(runs))
	if len(lost) == 0 {
		return []Row{{Section: section, Figure: figure, Value: "no run ended", Met: "n/a", Runs: done, Command: cmd, Notes: failNotes(fails)}}
	}
	return []Row{{Section: section, Figure: figure, Value: fmt.Sprintf("%.0f (most %d)", median(lost), maxLost), Runs: done, Command: cmd,
		Notes: fmt.Sprintf("SIGKILL once the subscriber has seen %d chunks (%.0f events counted, unmerged deltas); the restarted agenticd on the same data dir replays from before the turn, which must end the reply with ERROR(SERVER_RESTARTED) and MESSAGE_END(INTERRUPTED); lost = seen but not in that replay (the log's last batch, at most 5 ms)",
			killAfter, median(seen))}}
}
