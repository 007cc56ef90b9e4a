package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// turn runs the steps of one prompt (or of a load replay) for one session.
type turn struct {
	a      *agent
	s      *session
	prompt []sdk.ContentBlock
	meta   map[string]any // the prompt request's _meta
	resp   sdk.PromptResponse
}

func (t *turn) run(ctx context.Context, steps []Step) (sdk.PromptResponse, error) {
	t.resp.StopReason = sdk.StopReasonEndTurn
	_, err := t.steps(ctx, steps)
	return t.resp, err
}

// steps runs steps until one ends the turn (done) or the turn is cancelled (ctx ends
// when the client cancels the turn).
func (t *turn) steps(ctx context.Context, steps []Step) (done bool, err error) {
	for _, st := range steps {
		if ctx.Err() != nil {
			return true, nil
		}
		done, err := t.step(ctx, st)
		if err != nil || done {
			return done, err
		}
	}
	return false, nil
}

// Sends use a background context: a cancelled turn still reports what it did.
var sendCtx = context.Background()

func (t *turn) send(u sdk.SessionUpdate) error {
	return t.a.conn.SessionUpdate(sendCtx, sdk.SessionNotification{SessionId: t.s.id, Update: u})
}

func (t *turn) say(text string) error { return t.send(sdk.UpdateAgentMessageText(text)) }

func (t *turn) expandJSON(raw json.RawMessage) []byte {
	return []byte(expand(string(raw), t.s))
}

func (t *turn) step(ctx context.Context, st Step) (bool, error) {
	switch {
	case st.Update != nil:
		var u sdk.SessionUpdate
		if err := json.Unmarshal(t.expandJSON(st.Update), &u); err != nil {
			return false, fmt.Errorf("script update %s: %w", st.Update, err)
		}
		return false, t.send(u)
	case st.Raw != nil:
		line, err := json.Marshal(map[string]any{
			"jsonrpc": "2.0",
			"method":  sdk.ClientMethodSessionUpdate,
			"params":  map[string]any{"sessionId": t.s.id, "update": json.RawMessage(t.expandJSON(st.Raw))},
		})
		if err != nil {
			return false, err
		}
		_, err = t.a.out.Write(append(line, '\n'))
		return false, err
	case st.LateAfterCancel != nil:
		d, err := time.ParseDuration(st.LateAfterCancel.After)
		if err != nil {
			return false, fmt.Errorf("script lateAfterCancel: %w", err)
		}
		<-ctx.Done()
		time.Sleep(d)
		if err := t.say(st.LateAfterCancel.Text); err != nil {
			return false, err
		}
		t.resp.StopReason = sdk.StopReasonCancelled
		return true, nil
	case st.Line != "":
		_, err := t.a.out.Write([]byte(expand(st.Line, t.s) + "\n"))
		return false, err
	case st.LongLine > 0:
		line := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + string(t.s.id) +
			`","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("x", st.LongLine) + `"}}}}` + "\n"
		_, err := t.a.out.Write([]byte(line))
		return false, err
	case st.CloseOutput:
		// The connection ends for the client while the process lives on.
		_ = os.Stdout.Close()
		select {}
	case st.Text != nil:
		return false, t.say(*st.Text)
	case st.Thought != nil:
		return false, t.send(sdk.UpdateAgentThoughtText(*st.Thought))
	case st.Permission != nil:
		return t.permission(ctx, st.Permission)
	case st.Elicit != nil:
		return false, t.elicit(st.Elicit)
	case st.Read != nil:
		resp, err := t.a.conn.ReadTextFile(sendCtx, sdk.ReadTextFileRequest{
			SessionId: t.s.id, Path: expand(st.Read.Path, t.s), Line: st.Read.Line, Limit: st.Read.Limit,
		})
		if err != nil {
			return false, t.say("read error: " + errorText(err))
		}
		return false, t.say("read: " + resp.Content)
	case st.Write != nil:
		_, err := t.a.conn.WriteTextFile(sendCtx, sdk.WriteTextFileRequest{
			SessionId: t.s.id, Path: expand(st.Write.Path, t.s), Content: st.Write.Content,
		})
		if err != nil {
			return false, t.say("write error: " + errorText(err))
		}
		return false, t.say("write ok")
	case st.Terminal != nil:
		return false, t.terminal(st.Terminal)
	case st.Flood != nil:
		return false, t.flood(st.Flood)
	case st.Replay != nil:
		return false, t.replay(st.Replay)
	case st.Paced != nil:
		return false, t.paced(ctx, st.Paced)
	case st.Sleep != "":
		d, err := parseSleep(st.Sleep)
		if err != nil {
			return false, err
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		return false, nil
	case st.WaitCancel:
		<-ctx.Done()
		return false, nil
	case st.WaitSteer:
		select {
		case prompt := <-t.s.steered:
			var text []string
			for _, b := range prompt {
				if b.Text != nil {
					text = append(text, b.Text.Text)
				}
			}
			return false, t.send(sdk.UpdateAgentMessageText("steered: " + strings.Join(text, " ")))
		case <-ctx.Done():
			return false, nil
		}
	case st.EchoPrompt:
		b, err := json.Marshal(t.prompt)
		if err != nil {
			return false, err
		}
		return false, t.say(string(b))
	case st.EchoMeta:
		b, err := json.Marshal(t.meta)
		if err != nil {
			return false, err
		}
		return false, t.say(string(b))
	case st.EchoSetup:
		b, err := json.Marshal(map[string]any{"mcpServers": t.s.mcpServers, "additionalDirectories": t.s.dirs})
		if err != nil {
			return false, err
		}
		return false, t.say(string(b))
	case st.Shell != "":
		cmd := exec.Command("/bin/sh", "-c", expand(st.Shell, t.s))
		cmd.Dir = t.s.cwd
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		return false, t.say(fmt.Sprintf("shell exit %d: %s", code, out))
	case st.Spawn != "":
		cmd := exec.Command("/bin/sh", "-c", st.Spawn)
		if err := cmd.Start(); err != nil {
			return false, t.say("spawn error: " + err.Error())
		}
		go func() { _ = cmd.Wait() }()
		return false, t.say(fmt.Sprintf("spawned %d", cmd.Process.Pid))
	case st.Crash != nil:
		os.Exit(*st.Crash)
	case st.CrashOnce != "":
		marker := expand(st.CrashOnce, t.s)
		if _, err := os.Stat(marker); err == nil {
			return false, nil
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return false, err
		}
		os.Exit(3)
	case st.Hang:
		select {}
	case st.Stop != "" || st.Usage != nil:
		if st.Stop != "" {
			t.resp.StopReason = sdk.StopReason(st.Stop)
		}
		if st.Usage != nil {
			var u sdk.Usage
			if err := json.Unmarshal(st.Usage, &u); err != nil {
				return false, fmt.Errorf("script usage: %w", err)
			}
			t.resp.Usage = &u
		}
		return true, nil
	case st.Fail != nil:
		return true, &sdk.RequestError{Code: st.Fail.Code, Message: st.Fail.Message, Data: st.Fail.Data}
	}
	return false, fmt.Errorf("script step with nothing set")
}

var defaultOptions = []sdk.PermissionOption{
	{OptionId: "allow", Name: "Allow", Kind: sdk.PermissionOptionKindAllowOnce},
	{OptionId: "allow-always", Name: "Always allow", Kind: sdk.PermissionOptionKindAllowAlways},
	{OptionId: "reject", Name: "Reject", Kind: sdk.PermissionOptionKindRejectOnce},
}

// askPermission sends session/request_permission and returns the chosen option's kind
// ("cancelled" when cancelled). A permission is never bound to the turn's context:
// after session/cancel the client must answer it with cancelled itself.
func (t *turn) askPermission(p *PermissionStep) (string, string, error) {
	req := sdk.RequestPermissionRequest{SessionId: t.s.id, Options: defaultOptions}
	if err := json.Unmarshal(t.expandJSON(p.ToolCall), &req.ToolCall); err != nil {
		return "", "", fmt.Errorf("script permission toolCall: %w", err)
	}
	if p.Options != nil {
		if err := json.Unmarshal(p.Options, &req.Options); err != nil {
			return "", "", fmt.Errorf("script permission options: %w", err)
		}
	}
	resp, err := t.a.conn.RequestPermission(sendCtx, req)
	if err != nil {
		return "", "", err
	}
	if resp.Outcome.Selected == nil {
		return "cancelled", "", nil
	}
	for _, o := range req.Options {
		if o.OptionId == resp.Outcome.Selected.OptionId {
			return string(o.Kind), string(o.OptionId), nil
		}
	}
	return "", "", fmt.Errorf("client chose option %q that was not offered", resp.Outcome.Selected.OptionId)
}

func (t *turn) permission(ctx context.Context, p *PermissionStep) (bool, error) {
	kind, option, err := t.askPermission(p)
	if err != nil {
		return false, err
	}
	if p.Report {
		if err := t.say("permission: " + strings.TrimSpace(kind+" "+option)); err != nil {
			return false, err
		}
	}
	switch kind {
	case string(sdk.PermissionOptionKindAllowOnce), string(sdk.PermissionOptionKindAllowAlways):
		return t.steps(ctx, p.OnAllow)
	case "cancelled":
		return t.steps(ctx, p.OnCancel)
	default:
		return t.steps(ctx, p.OnReject)
	}
}

func (t *turn) terminal(ts *TerminalStep) error {
	req := sdk.CreateTerminalRequest{
		SessionId: t.s.id, Command: expand(ts.Command, t.s), Args: ts.Args, OutputByteLimit: ts.OutputByteLimit,
	}
	if ts.Cwd != nil {
		cwd := expand(*ts.Cwd, t.s)
		req.Cwd = &cwd
	}
	for k, v := range ts.Env {
		req.Env = append(req.Env, sdk.EnvVariable{Name: k, Value: v})
	}
	created, err := t.a.conn.CreateTerminal(sendCtx, req)
	if err != nil {
		return t.say("terminal error: " + errorText(err))
	}
	id := created.TerminalId
	if ts.ToolCallID != "" {
		err := t.send(sdk.StartToolCall(sdk.ToolCallId(ts.ToolCallID), "Run "+req.Command,
			sdk.WithStartKind(sdk.ToolKindExecute),
			sdk.WithStartStatus(sdk.ToolCallStatusInProgress),
			sdk.WithStartRawInput(map[string]any{"command": req.Command}),
			sdk.WithStartContent([]sdk.ToolCallContent{sdk.ToolTerminalRef(id)})))
		if err != nil {
			return err
		}
	}
	if ts.Kill {
		if _, err := t.a.conn.KillTerminal(sendCtx, sdk.KillTerminalRequest{SessionId: t.s.id, TerminalId: id}); err != nil {
			return t.say("terminal error: " + errorText(err))
		}
	}
	exit, err := t.a.conn.WaitForTerminalExit(sendCtx, sdk.WaitForTerminalExitRequest{SessionId: t.s.id, TerminalId: id})
	if err != nil {
		return t.say("terminal error: " + errorText(err))
	}
	out, err := t.a.conn.TerminalOutput(sendCtx, sdk.TerminalOutputRequest{SessionId: t.s.id, TerminalId: id})
	if err != nil {
		return t.say("terminal error: " + errorText(err))
	}
	if ts.ToolCallID != "" {
		err := t.send(sdk.UpdateToolCall(sdk.ToolCallId(ts.ToolCallID), sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted)))
		if err != nil {
			return err
		}
	}
	if !ts.NoRelease {
		if _, err := t.a.conn.ReleaseTerminal(sendCtx, sdk.ReleaseTerminalRequest{SessionId: t.s.id, TerminalId: id}); err != nil {
			return t.say("terminal error: " + errorText(err))
		}
	}
	code := -1
	if exit.ExitCode != nil {
		code = *exit.ExitCode
	}
	signal := ""
	if exit.Signal != nil {
		signal = *exit.Signal
	}
	return t.say(fmt.Sprintf("terminal exit=%d signal=%s truncated=%t output=%q", code, signal, out.Truncated, out.Output))
}

// floodChunk is chunk i of a flood: its index, then padding up to size bytes.
func floodChunk(i, size int) string {
	prefix := fmt.Sprintf("%08d|", i)
	if size <= len(prefix) {
		return prefix
	}
	return prefix + strings.Repeat("x", size-len(prefix))
}

func (t *turn) flood(f *FloodStep) error {
	type answer struct {
		kind, option string
		err          error
	}
	var perm chan answer
	for i := 0; i < f.Count; i++ {
		if f.PermissionAt > 0 && i == f.PermissionAt {
			// The tool call, then (while the flood goes on) the request about it: the
			// client must see them in that order.
			call := json.RawMessage(`{"toolCallId":"flood-permission","title":"Write {cwd}/flood.txt","kind":"edit","status":"pending","locations":[{"path":"{cwd}/flood.txt"}]}`)
			var u sdk.SessionUpdate
			if err := json.Unmarshal(t.expandJSON([]byte(`{"sessionUpdate":"tool_call",`+string(call[1:]))), &u); err != nil {
				return err
			}
			if err := t.send(u); err != nil {
				return err
			}
			perm = make(chan answer, 1)
			go func() {
				kind, option, err := t.askPermission(&PermissionStep{ToolCall: call})
				perm <- answer{kind, option, err}
			}()
		}
		text := floodChunk(i, f.Size)
		u := sdk.UpdateAgentMessageText(text)
		if f.Kind == "agent_thought_chunk" {
			u = sdk.UpdateAgentThoughtText(text)
		}
		if err := t.send(u); err != nil {
			return err
		}
	}
	if perm != nil {
		a := <-perm
		if a.err != nil {
			return a.err
		}
		if err := t.send(sdk.UpdateToolCall("flood-permission", sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted))); err != nil {
			return err
		}
		return t.say("permission: " + strings.TrimSpace(a.kind+" "+a.option))
	}
	return nil
}

func (t *turn) replay(r *ReplayStep) error {
	for m := 0; m < r.Messages; m++ {
		text := floodChunk(m, r.Size)
		var u sdk.SessionUpdate
		if m%2 == 0 {
			u = sdk.UpdateUserMessageText("u" + text)
		} else {
			u = sdk.UpdateAgentMessageText("a" + text)
		}
		if err := t.send(u); err != nil {
			return err
		}
	}
	return nil
}

// errorText is the message of an ACP error as an agent would show it.
func errorText(err error) string {
	if re, ok := err.(*sdk.RequestError); ok {
		if re.Data != nil {
			b, _ := json.Marshal(re.Data)
			return re.Message + ": " + string(b)
		}
		return re.Message
	}
	return err.Error()
}
