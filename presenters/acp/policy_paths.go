package acp

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
)

// Agents name the files a tool touches in many shapes: claude-code-acp
// {"file_path"}, gemini {"absolute_path"} or {"dir_path"}, codex {"changes":
// {"/abs/path": …}} or {"workdir"}, arrays ({"paths": […]}) and nested edit lists. The
// policy therefore walks the whole raw input rather than a list of known fields.
var (
	// pathKey matches the names of fields whose strings (at any depth) are paths.
	pathKey = regexp.MustCompile(`(?i)path|file|dir|cwd|workdir|destination|target|source`)
	// contentKey matches names that pathKey also matches but that hold text, not a
	// path ("file_text", "file_pattern"): only their path-shaped strings count.
	contentKey = regexp.MustCompile(`(?i)text|content|pattern|glob|regex|query`)
	// commandKey names fields holding a command line: its risk is classified instead,
	// and "/usr/bin/make" there is a program to run, not a file to write.
	commandKey = regexp.MustCompile(`(?i)^(command|cmd|commandline|script|argv|args|proposed_execpolicy_amendment)$`)
)

// The raw input walk is bounded; an input beyond the bounds is not checked but refused.
const (
	maxInputDepth = 32
	maxInputNodes = 10000
)

// errInputTooLarge says a tool call's raw input was too deep or too large to check.
var errInputTooLarge = errors.New("the tool call's raw input is too deep or too large to check its paths")

// targetPaths lists the files a tool call would touch: its locations, its diffs'
// paths, every string under a path-like raw input field, and every path-shaped string
// or map key (absolute, or starting with ~; a key also when it climbs with ..) anywhere in the raw input. The error is
// errInputTooLarge when the raw input exceeded the walk's bounds (paths then holds
// what was found before).
func targetPaths(call presenters.ToolCall) ([]string, error) {
	w := inputWalk{}
	for _, l := range call.Locations {
		w.add(l.Path)
	}
	for _, c := range call.Content {
		if c.Diff != nil {
			w.add(c.Diff.Path)
		}
	}
	if len(call.Arguments) > 0 {
		var input any
		if json.Unmarshal(call.Arguments, &input) == nil {
			w.walk(input, false, false, 0)
		}
	}
	if w.tooLarge {
		return w.paths, errInputTooLarge
	}
	return w.paths, nil
}

type inputWalk struct {
	paths    []string
	nodes    int
	tooLarge bool
}

func (w *inputWalk) add(p string) {
	if p != "" && !slices.Contains(w.paths, p) {
		w.paths = append(w.paths, p)
	}
}

// walk visits v; underPath says a path-like field encloses it, underCommand a command
// field.
func (w *inputWalk) walk(v any, underPath, underCommand bool, depth int) {
	if w.tooLarge {
		return
	}
	w.nodes++
	if depth > maxInputDepth || w.nodes > maxInputNodes {
		w.tooLarge = true
		return
	}
	switch t := v.(type) {
	case string:
		if underPath || (!underCommand && pathShaped(t)) {
			w.add(t)
		}
	case []any:
		for _, e := range t {
			w.walk(e, underPath, underCommand, depth+1)
		}
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys) // a stable order for the request's Paths
		for _, k := range keys {
			if pathShaped(k) || climbsOut(k) {
				w.add(k) // codex: {"changes": {"/abs/path": …}}
			}
			isPath := pathKey.MatchString(k) && !contentKey.MatchString(k)
			w.walk(t[k], underPath || isPath, underCommand || commandKey.MatchString(k), depth+1)
		}
	}
}

// climbsOut reports whether a map key has a ".." component: keys are field names or
// paths, and a field name never climbs.
func climbsOut(k string) bool {
	return slices.Contains(strings.Split(filepath.ToSlash(k), "/"), "..")
}

// pathShaped reports whether a string outside any path field still reads as a path:
// one line, absolute or starting with ~. Multi-line strings are file contents.
func pathShaped(s string) bool {
	if strings.ContainsAny(s, "\n\r") {
		return false
	}
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~")
}

// outsideReason checks paths against the workspace and returns why the first one that
// is outside (or cannot be checked) is refused; "" when all lie inside. Agents expand
// ~ to $HOME, so ~ is $HOME here too: inside only when the workspace is under $HOME
// and the path resolves inside it.
func outsideReason(ws workspaceResolver, paths []string) string {
	for _, path := range paths {
		resolve := path
		if strings.HasPrefix(path, "~") {
			if path != "~" && !strings.HasPrefix(path, "~/") {
				return fmt.Sprintf("path %s names another user's home directory, outside the session's workspace %s", path, ws.Root())
			}
			home, err := sandbox.ExpandHome(path)
			if err != nil {
				return fmt.Sprintf("path %s cannot be checked against the session's workspace: %v", path, err)
			}
			resolve = home
		}
		if _, err := ws.Resolve(resolve); err != nil {
			if errors.Is(err, sandbox.ErrOutsideWorkspace) {
				return fmt.Sprintf("path %s is outside the session's workspace %s", path, ws.Root())
			}
			return fmt.Sprintf("path %s cannot be checked against the session's workspace: %v", path, err)
		}
	}
	return ""
}
