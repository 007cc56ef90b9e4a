package deepchat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/textutil"
	"github.com/agenticd/agenticd/sandbox"
)

const (
	// maxToolOutput bounds what one tool result sends back to the model.
	maxToolOutput = 100 << 10
	// maxToolTitle bounds the command quoted in a run_command title (bytes).
	maxToolTitle = 80
)

// toolSpec is one tool the model may call.
type toolSpec struct {
	name        string
	description string
	parameters  string // JSON schema
	kind        presenters.ToolKind
	permission  presenters.PermissionType
	// risk is what an allow-always answer for the tool covers (medium when empty); a
	// command's own classification takes its place.
	risk presenters.RiskLevel
	// alwaysAsk makes every mode ask, whatever it lets run (a destructive MCP tool).
	alwaysAsk bool
	// server names the MCP server of an MCP tool ("" for a built-in one).
	server string
	// prepare validates the arguments and plans the call without side effects.
	prepare func(r *turnRun, args json.RawMessage) (toolPlan, error)
}

// toolPlan is a validated tool call, ready to be authorized and run.
type toolPlan struct {
	title       string
	description string // for the permission request
	paths       []string
	locations   []presenters.ToolLocation
	command     *presenters.CommandInfo
	// diffs are the file changes the call would make, as planned: shown with the
	// permission request. The file may still change before the call runs.
	diffs []presenters.DiffBlock
	// run performs the call; report publishes progress (new tool content).
	run func(ctx context.Context, report func([]presenters.ToolContent)) (toolOutput, error)
}

type toolOutput struct {
	text    string // what the model reads
	content []presenters.ToolContent
	// blocks follow the tool call's block in the reply (an MCP tool's UI resources).
	blocks []presenters.Block
}

var toolSpecs = []toolSpec{
	{
		name:        "read_file",
		description: "Read a text file of the workspace. Lines are 1-based; give line and limit to read part of a large file.",
		parameters: `{"type":"object","properties":{
			"path":{"type":"string","description":"File path, relative to the workspace root"},
			"line":{"type":"integer","description":"First line to read (1-based)"},
			"limit":{"type":"integer","description":"Maximum number of lines"}},"required":["path"]}`,
		kind: presenters.ToolRead, permission: presenters.PermissionRead, prepare: prepareRead,
	},
	{
		name:        "write_file",
		description: "Create or overwrite a text file of the workspace with the given content (parent directories are created).",
		parameters: `{"type":"object","properties":{
			"path":{"type":"string","description":"File path, relative to the workspace root"},
			"content":{"type":"string","description":"The complete new content of the file"}},"required":["path","content"]}`,
		kind: presenters.ToolEdit, permission: presenters.PermissionWrite, prepare: prepareWrite,
	},
	{
		name:        "edit_file",
		description: "Replace an exact piece of text in a file. old_string must match the file exactly (whitespace included) and be unique unless replace_all is true.",
		parameters: `{"type":"object","properties":{
			"path":{"type":"string","description":"File path, relative to the workspace root"},
			"old_string":{"type":"string","description":"The exact text to replace"},
			"new_string":{"type":"string","description":"The replacement text"},
			"replace_all":{"type":"boolean","description":"Replace every occurrence"}},"required":["path","old_string","new_string"]}`,
		kind: presenters.ToolEdit, permission: presenters.PermissionWrite, prepare: prepareEdit,
	},
	{
		name:        "list_directory",
		description: "List a directory of the workspace (default: the root).",
		parameters: `{"type":"object","properties":{
			"path":{"type":"string","description":"Directory path, relative to the workspace root"}}}`,
		kind: presenters.ToolRead, permission: presenters.PermissionRead, prepare: prepareList,
	},
	{
		name:        "search_files",
		description: "Search file contents of the workspace for a regular expression (Go syntax); returns path:line: text.",
		parameters: `{"type":"object","properties":{
			"pattern":{"type":"string","description":"Regular expression"},
			"path":{"type":"string","description":"Directory or file to search (default: the root)"},
			"glob":{"type":"string","description":"Only files whose name matches, e.g. *.go"},
			"max_results":{"type":"integer","description":"Maximum matches (default 200)"}},"required":["pattern"]}`,
		kind: presenters.ToolSearch, permission: presenters.PermissionRead, prepare: prepareSearch,
	},
	{
		name:        "run_command",
		description: "Run a shell command line (/bin/sh -c) in the workspace and return its exit code and output. Output is capped; long-running commands are killed at the timeout.",
		parameters: `{"type":"object","properties":{
			"command":{"type":"string","description":"The shell command line"},
			"cwd":{"type":"string","description":"Working directory, relative to the workspace root"},
			"timeout_seconds":{"type":"integer","description":"Kill the command after this many seconds"}},"required":["command"]}`,
		kind: presenters.ToolExecute, permission: presenters.PermissionCommand, prepare: prepareRun,
	},
}

var (
	toolsByName = func() map[string]*toolSpec {
		m := make(map[string]*toolSpec, len(toolSpecs))
		for i := range toolSpecs {
			m[toolSpecs[i].name] = &toolSpecs[i]
		}
		return m
	}()
	toolDefs = func() []toolDef {
		defs := make([]toolDef, len(toolSpecs))
		for i, s := range toolSpecs {
			var schema bytes.Buffer
			if err := json.Compact(&schema, []byte(s.parameters)); err != nil {
				panic("tool " + s.name + ": bad parameter schema: " + err.Error())
			}
			defs[i] = toolDef{Type: "function", Function: functionDef{Name: s.name, Description: s.description, Parameters: schema.Bytes()}}
		}
		return defs
	}()
)

func toolNames() string {
	names := make([]string, len(toolSpecs))
	for i, s := range toolSpecs {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// decodeArgs reads a tool's JSON arguments into v, naming what is wrong for the model.
func decodeArgs(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("the arguments are not a valid JSON object for this tool: %v", err)
	}
	return nil
}

// resolve checks a path against the workspace before anything asks or runs.
func (r *turnRun) resolve(path string) (string, error) {
	if strings.TrimSpace(path) == "" {
		return "", errors.New("path is required")
	}
	abs, err := r.ws.Resolve(path)
	if err != nil {
		return "", err
	}
	return abs, nil
}

func prepareRead(r *turnRun, args json.RawMessage) (toolPlan, error) {
	var a struct {
		Path  string `json:"path"`
		Line  int    `json:"line"`
		Limit int    `json:"limit"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return toolPlan{}, err
	}
	abs, err := r.resolve(a.Path)
	if err != nil {
		return toolPlan{}, err
	}
	return toolPlan{
		title: "Read " + a.Path, description: "read " + abs, paths: []string{abs},
		locations: []presenters.ToolLocation{{Path: abs, Line: max(a.Line, 0)}},
		run: func(ctx context.Context, _ func([]presenters.ToolContent)) (toolOutput, error) {
			text, err := r.ws.ReadTextFile(a.Path, sandbox.ReadOptions{Line: a.Line, Limit: a.Limit})
			if err != nil {
				return toolOutput{}, err
			}
			if text == "" {
				text = "(empty)"
			}
			return toolOutput{text: text}, nil
		},
	}, nil
}

// currentText reads a file's text for a diff; a missing or unreadable file has none.
func (r *turnRun) currentText(path string) (string, bool) {
	text, err := r.ws.ReadTextFile(path, sandbox.ReadOptions{})
	if err != nil {
		return "", false
	}
	return text, true
}

func prepareWrite(r *turnRun, args json.RawMessage) (toolPlan, error) {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return toolPlan{}, err
	}
	if a.Content == nil {
		return toolPlan{}, errors.New("content is required (use an empty string for an empty file)")
	}
	abs, err := r.resolve(a.Path)
	if err != nil {
		return toolPlan{}, err
	}
	current, _ := r.currentText(a.Path)
	return toolPlan{
		title: "Write " + a.Path, description: fmt.Sprintf("write %d bytes to %s", len(*a.Content), abs), paths: []string{abs},
		locations: []presenters.ToolLocation{{Path: abs}}, diffs: []presenters.DiffBlock{*boundedDiff(abs, current, *a.Content)},
		run: func(ctx context.Context, _ func([]presenters.ToolContent)) (toolOutput, error) {
			old, existed := r.currentText(a.Path)
			if err := r.ws.WriteTextFile(a.Path, *a.Content); err != nil {
				return toolOutput{}, err
			}
			verb := "Created"
			if existed {
				verb = "Overwrote"
			}
			return toolOutput{
				text:    fmt.Sprintf("%s %s (%d bytes).", verb, a.Path, len(*a.Content)),
				content: []presenters.ToolContent{{Diff: boundedDiff(abs, old, *a.Content)}},
			}, nil
		},
	}, nil
}

func prepareEdit(r *turnRun, args json.RawMessage) (toolPlan, error) {
	var a struct {
		Path       string `json:"path"`
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return toolPlan{}, err
	}
	if a.OldString == "" {
		return toolPlan{}, errors.New("old_string must not be empty; use write_file to create or overwrite a file")
	}
	abs, err := r.resolve(a.Path)
	if err != nil {
		return toolPlan{}, err
	}
	// An edit that would not apply as the file is now is still asked for (the file may
	// change before it runs); it then shows no diff, and fails when it runs.
	var diffs []presenters.DiffBlock
	if current, ok := r.currentText(a.Path); ok {
		if updated, _, err := replaceIn(current, a.Path, a.OldString, a.NewString, a.ReplaceAll); err == nil {
			diffs = []presenters.DiffBlock{*boundedDiff(abs, current, updated)}
		}
	}
	return toolPlan{
		title: "Edit " + a.Path, description: "edit " + abs, paths: []string{abs},
		locations: []presenters.ToolLocation{{Path: abs}}, diffs: diffs,
		run: func(ctx context.Context, _ func([]presenters.ToolContent)) (toolOutput, error) {
			old, err := r.ws.ReadTextFile(a.Path, sandbox.ReadOptions{})
			if err != nil {
				return toolOutput{}, err
			}
			updated, n, err := replaceIn(old, a.Path, a.OldString, a.NewString, a.ReplaceAll)
			if err != nil {
				return toolOutput{}, err
			}
			if err := r.ws.WriteTextFile(a.Path, updated); err != nil {
				return toolOutput{}, err
			}
			return toolOutput{
				text:    fmt.Sprintf("Replaced %d occurrence(s) in %s.", n, a.Path),
				content: []presenters.ToolContent{{Diff: boundedDiff(abs, old, updated)}},
			}, nil
		},
	}, nil
}

// replaceIn replaces oldString in text (once, or every occurrence with all) and
// returns the new text and the number of replacements; oldString must occur, and only
// once unless all is set.
func replaceIn(text, path, oldString, newString string, all bool) (string, int, error) {
	n := strings.Count(text, oldString)
	switch {
	case n == 0:
		return "", 0, fmt.Errorf("old_string was not found in %s; read the file and copy the exact text, whitespace included", path)
	case n > 1 && !all:
		return "", 0, fmt.Errorf("old_string occurs %d times in %s; include more surrounding text to make it unique, or set replace_all", n, path)
	}
	if !all {
		return strings.Replace(text, oldString, newString, 1), 1, nil
	}
	return strings.ReplaceAll(text, oldString, newString), n, nil
}

func prepareList(r *turnRun, args json.RawMessage) (toolPlan, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return toolPlan{}, err
	}
	if a.Path == "" {
		a.Path = "."
	}
	abs, err := r.resolve(a.Path)
	if err != nil {
		return toolPlan{}, err
	}
	return toolPlan{
		title: "List " + a.Path, description: "list " + abs, paths: []string{abs},
		locations: []presenters.ToolLocation{{Path: abs}},
		run: func(ctx context.Context, _ func([]presenters.ToolContent)) (toolOutput, error) {
			entries, err := r.ws.ListDir(a.Path)
			if err != nil {
				return toolOutput{}, err
			}
			if len(entries) == 0 {
				return toolOutput{text: "(empty directory)"}, nil
			}
			var sb strings.Builder
			for _, e := range entries {
				if e.IsDir {
					fmt.Fprintf(&sb, "%s/\n", e.Name)
				} else {
					fmt.Fprintf(&sb, "%s (%d bytes)\n", e.Name, e.Size)
				}
			}
			return toolOutput{text: sb.String()}, nil
		},
	}, nil
}

func prepareSearch(r *turnRun, args json.RawMessage) (toolPlan, error) {
	var a struct {
		Pattern    string `json:"pattern"`
		Path       string `json:"path"`
		Glob       string `json:"glob"`
		MaxResults int    `json:"max_results"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return toolPlan{}, err
	}
	if a.Pattern == "" {
		return toolPlan{}, errors.New("pattern is required")
	}
	where := a.Path
	if where == "" {
		where = "."
	}
	abs, err := r.resolve(where)
	if err != nil {
		return toolPlan{}, err
	}
	return toolPlan{
		title: "Search " + a.Pattern, description: fmt.Sprintf("search %s for %q", abs, a.Pattern), paths: []string{abs},
		locations: []presenters.ToolLocation{{Path: abs}},
		run: func(ctx context.Context, _ func([]presenters.ToolContent)) (toolOutput, error) {
			matches, err := r.ws.SearchFiles(ctx, sandbox.SearchQuery{Pattern: a.Pattern, Path: a.Path, Glob: a.Glob, MaxResults: a.MaxResults})
			if err != nil {
				return toolOutput{}, err
			}
			if len(matches) == 0 {
				return toolOutput{text: "No matches."}, nil
			}
			var sb strings.Builder
			for _, m := range matches {
				fmt.Fprintf(&sb, "%s:%d: %s\n", m.Path, m.Line, m.Text)
			}
			return toolOutput{text: sb.String()}, nil
		},
	}, nil
}

func prepareRun(r *turnRun, args json.RawMessage) (toolPlan, error) {
	var a struct {
		Command        string `json:"command"`
		Cwd            string `json:"cwd"`
		TimeoutSeconds int    `json:"timeout_seconds"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return toolPlan{}, err
	}
	if strings.TrimSpace(a.Command) == "" {
		return toolPlan{}, errors.New("command is required")
	}
	cwd := "."
	if a.Cwd != "" {
		cwd = a.Cwd
	}
	absCwd, err := r.resolve(cwd)
	if err != nil {
		return toolPlan{}, err
	}
	info := r.p.classifier.ClassifyIn(a.Command, r.ws.Root(), absCwd)
	info.Cwd = absCwd
	timeout := r.p.cfg.CommandTimeout
	if a.TimeoutSeconds > 0 && time.Duration(a.TimeoutSeconds)*time.Second < timeout {
		timeout = time.Duration(a.TimeoutSeconds) * time.Second
	}
	title := textutil.Prefix(a.Command, maxToolTitle)
	if len(title) < len(a.Command) {
		title += "…"
	}
	// The description leaves the risk out: clients show command's, and would show it
	// twice.
	return toolPlan{
		title:       "Run " + title,
		description: fmt.Sprintf("run `%s` in %s", a.Command, absCwd),
		paths:       []string{absCwd}, locations: []presenters.ToolLocation{{Path: absCwd}}, command: &info,
		run: func(ctx context.Context, report func([]presenters.ToolContent)) (toolOutput, error) {
			return r.runCommand(ctx, a.Command, a.Cwd, timeout, report)
		},
	}, nil
}

// runCommand runs one shell line in a terminal of its own, which it always releases.
func (r *turnRun) runCommand(ctx context.Context, command, cwd string, timeout time.Duration, report func([]presenters.ToolContent)) (toolOutput, error) {
	terms := r.ws.NewTerminals()
	defer terms.Close()
	id, err := terms.Create(ctx, sandbox.TerminalSpec{Command: command, Cwd: cwd, OutputByteLimit: commandOutputLimit})
	if err != nil {
		return toolOutput{}, err
	}
	report([]presenters.ToolContent{{Terminal: &presenters.TerminalBlock{TerminalID: id, Command: command}}})
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, waitErr := terms.WaitForExit(waitCtx, id)
	if waitErr != nil {
		if err := terms.Kill(id); err != nil {
			r.log.Warn("kill command", "terminal_id", id, "err", err)
		}
	}
	out, err := terms.Output(id)
	if err != nil {
		return toolOutput{}, err
	}
	tb := &presenters.TerminalBlock{TerminalID: id, Command: command, Output: out.Output, Truncated: out.Truncated}
	if out.Exit != nil {
		tb.ExitCode, tb.Signal = out.Exit.Code, out.Exit.Signal
	}
	res := toolOutput{content: []presenters.ToolContent{{Terminal: tb}}}
	var sb strings.Builder
	switch {
	case waitErr != nil && ctx.Err() == nil:
		fmt.Fprintf(&sb, "The command did not finish within %s and was killed.\n", timeout)
	case tb.ExitCode != nil:
		fmt.Fprintf(&sb, "Exit code: %d\n", *tb.ExitCode)
	case tb.Signal != "":
		fmt.Fprintf(&sb, "Killed by signal %s\n", tb.Signal)
	}
	if out.Truncated {
		fmt.Fprintf(&sb, "(only the last %d bytes of output are shown)\n", commandOutputLimit)
	}
	text := strings.ReplaceAll(out.Output, "\r\n", "\n")
	if text == "" {
		text = "(no output)"
	}
	sb.WriteString(text)
	res.text = sb.String()
	switch {
	case waitErr != nil && ctx.Err() == nil:
		return res, fmt.Errorf("the command timed out after %s", timeout)
	case tb.ExitCode != nil && *tb.ExitCode != 0:
		return res, fmt.Errorf("the command exited with code %d", *tb.ExitCode)
	case tb.Signal != "":
		return res, fmt.Errorf("the command was killed by %s", tb.Signal)
	}
	return res, nil
}

// rawArguments keeps a tool call's arguments as the model sent them, as JSON: text that
// is not JSON is kept as a JSON string.
func rawArguments(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	data, _ := json.Marshal(s)
	return data
}

// runTool runs one tool call from start to end, permission included, and returns what
// the model reads back.
func (r *turnRun) runTool(ctx context.Context, call toolCall) string {
	tc := presenters.ToolCall{ToolID: call.ID, ToolName: call.Function.Name, Title: call.Function.Name,
		Kind: presenters.ToolOther, Status: presenters.ToolPending, Arguments: rawArguments(call.Function.Arguments)}
	spec := r.spec(call.Function.Name)
	var plan toolPlan
	var prepErr error
	if spec == nil {
		prepErr = fmt.Errorf("there is no tool named %q; the tools are: %s", call.Function.Name, r.availableTools())
	} else {
		tc.Kind = spec.kind
		if !json.Valid([]byte(call.Function.Arguments)) {
			prepErr = fmt.Errorf("the arguments are not valid JSON: %q", call.Function.Arguments)
		} else {
			plan, prepErr = spec.prepare(r, json.RawMessage(call.Function.Arguments))
		}
		if plan.title != "" {
			tc.Title = plan.title
		}
		tc.Locations, tc.CommandInfo = plan.locations, plan.command
	}
	idx := r.addBlock(presenters.Block{Type: presenters.BlockTool, Tool: &tc})
	r.em.ToolStart(r.reply.ID, tc)
	if prepErr != nil {
		return r.endTool(ctx, idx, tc, toolOutput{}, prepErr)
	}
	allowed, why := r.authorize(ctx, tc, spec, plan)
	if ctx.Err() != nil {
		return r.endTool(ctx, idx, tc, toolOutput{}, ctx.Err())
	}
	if !allowed {
		tc.Status = presenters.ToolFailed
		tc.Error = "permission denied: " + why
		text := "The user did not allow this tool call (" + why + "). Do not repeat it unchanged; continue without it or ask the user."
		return r.settleTool(idx, tc, text)
	}
	tc.Status = presenters.ToolInProgress
	r.setTool(idx, tc)
	r.em.ToolRunning(r.reply.ID, tc)
	out, err := plan.run(ctx, func(content []presenters.ToolContent) {
		tc.Content = content
		r.setTool(idx, tc)
		r.em.ToolRunning(r.reply.ID, tc)
	})
	return r.endTool(ctx, idx, tc, out, err)
}

// endTool sets a tool call's final state from its outcome.
func (r *turnRun) endTool(ctx context.Context, idx int, tc presenters.ToolCall, out toolOutput, err error) string {
	if out.content != nil {
		tc.Content = out.content
	}
	text := out.text
	switch {
	case ctx.Err() != nil:
		tc.Status, tc.Error = presenters.ToolCancelled, "cancelled"
		text = "The tool call was cancelled."
	case err != nil:
		// File names in sandbox errors are bytes from the file system.
		tc.Status, tc.Error = presenters.ToolFailed, strings.ToValidUTF8(err.Error(), "\uFFFD")
		if text == "" {
			text = "Error: " + err.Error()
		} else {
			text = "Error: " + err.Error() + "\n" + text
		}
	default:
		tc.Status = presenters.ToolCompleted
	}
	text = r.settleTool(idx, tc, text)
	for _, b := range out.blocks {
		r.addBlock(b)
		r.em.MessageBlock(r.reply.ID, presenters.RoleAssistant, b)
	}
	return text
}

// settleTool records the final tool state, publishes TOOL_END and checkpoints the reply.
func (r *turnRun) settleTool(idx int, tc presenters.ToolCall, text string) string {
	text = capOutput(text)
	tc.Result, _ = json.Marshal(text)
	r.setTool(idx, tc)
	r.em.ToolEnd(r.reply.ID, tc)
	r.checkpoint()
	return text
}

func (r *turnRun) setTool(idx int, tc presenters.ToolCall) {
	r.reply.Blocks[idx].Tool = &tc
}

// capOutput keeps a tool result within maxToolOutput, at a UTF-8 boundary.
func capOutput(s string) string {
	cut := textutil.Prefix(s, maxToolOutput)
	if len(cut) == len(s) {
		return s
	}
	return cut + fmt.Sprintf("\n[... %d more bytes cut; read a smaller range]", len(s)-len(cut))
}
