package acp

import (
	"encoding/json"

	"github.com/agenticd/agenticd/presenters"
)

// requestDiffs are the file changes a tool call announces in its own content (ACP
// `diff` content: path, oldText, newText), for a person to see before answering.
func requestDiffs(call presenters.ToolCall) []presenters.DiffBlock {
	var out []presenters.DiffBlock
	for _, c := range call.Content {
		if c.Diff != nil {
			out = append(out, *c.Diff)
		}
	}
	return out
}

// requestCommand is the tool call's command as classified, with the directory its raw
// input names. A copy: the tool call's own state is not changed.
func requestCommand(call presenters.ToolCall) *presenters.CommandInfo {
	if call.CommandInfo == nil {
		return nil
	}
	info := *call.CommandInfo
	if cwd := cwdOf(call.Arguments); cwd != "" {
		info.Cwd = cwd
	}
	return &info
}

// cwdOf reads the working directory from a command tool's raw input, under the names
// agents give it (codex-acp's exec sends cwd; others workdir or working_directory); ""
// when it names none.
func cwdOf(args json.RawMessage) string {
	var in map[string]json.RawMessage
	if json.Unmarshal(args, &in) != nil {
		return ""
	}
	for _, key := range []string{"cwd", "workdir", "working_directory"} {
		var s string
		if json.Unmarshal(in[key], &s) == nil && s != "" {
			return s
		}
	}
	return ""
}
