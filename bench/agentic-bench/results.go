package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Row is one line of docs/BENCHMARKS.md. Subcommands append rows to the results file
// (JSON lines); `agentic-bench report` renders them.
type Row struct {
	Section string `json:"section"`
	Figure  string `json:"figure"`
	Target  string `json:"target,omitempty"`
	// Value is the figure (median of the runs), Ratio the same figure against the
	// baseline of the same run where there is one.
	Value string `json:"value"`
	Ratio string `json:"ratio,omitempty"`
	// Met is "yes", "no", or "" when the row has no target; "n/a" when it could not run.
	Met     string `json:"met,omitempty"`
	Runs    string `json:"runs,omitempty"`
	Command string `json:"command"`
	Notes   string `json:"notes,omitempty"`
}

func metStr(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// notAvailable is the row of a figure that could not be measured.
func notAvailable(section, figure, target string, err error) Row {
	return Row{Section: section, Figure: figure, Target: target, Value: "not available: " + oneLine(err.Error()),
		Met: "n/a", Command: commandLine()}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// commandLine is how this run was invoked, without the output file flag, for the table.
func commandLine() string {
	args := []string{"agentic-bench"}
	for i := 1; i < len(os.Args); i++ {
		a := os.Args[i]
		if a == "-results" || a == "--results" {
			i++
			continue
		}
		if strings.HasPrefix(a, "-results=") || strings.HasPrefix(a, "--results=") {
			continue
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

// emit prints the rows and appends them to the results file (if any).
func emit(path string, rows ...Row) error {
	for _, r := range rows {
		fmt.Printf("%-14s | %-60s | %-28s | %-22s | met=%-3s | %s | %s\n", r.Section, r.Figure, r.Value, r.Ratio, r.Met, r.Runs, r.Notes)
	}
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
