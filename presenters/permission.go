package presenters

import (
	"fmt"
	"strings"
)

// PermissionMode is the permission vocabulary shared by every agent: a DeepChat
// session's mode and an ACP agent's policy_mode. It says which tool calls run without
// asking a person. It never refuses anything: refusals come from the server's own
// checks (a target outside the workspace is refused before any mode is consulted)
// and from the person asked.
type PermissionMode string

const (
	// PermissionModeStrict asks for every tool call.
	PermissionModeStrict PermissionMode = "strict"
	// PermissionModeBalanced lets reads (reading, listing, searching) run and asks for
	// writes, edits, commands and tools of any other kind.
	PermissionModeBalanced PermissionMode = "balanced"
	// PermissionModePermissive lets everything run except commands classified high or
	// critical risk, and calls whose risk cannot be known: a command with no
	// classification, or a tool of unknown kind (which may run one).
	PermissionModePermissive PermissionMode = "permissive"
)

// permissionModes are the valid modes, from the most to the least cautious.
var permissionModes = []PermissionMode{PermissionModeStrict, PermissionModeBalanced, PermissionModePermissive}

// ParsePermissionMode returns the mode named s, or ErrInvalidArgument naming the valid
// ones. The empty string is not a mode: each agent has its own default.
func ParsePermissionMode(s string) (PermissionMode, error) {
	for _, m := range permissionModes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("permission mode %q is not one of %s: %w", s, permissionModeList(), ErrInvalidArgument)
}

func permissionModeList() string {
	names := make([]string, len(permissionModes))
	for i, m := range permissionModes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// PermissionVerdict is a mode's answer to one tool call.
type PermissionVerdict string

const (
	// VerdictAsk: a person decides.
	VerdictAsk PermissionVerdict = "ask"
	// VerdictAllow: the call runs without asking.
	VerdictAllow PermissionVerdict = "allow"
)

// Decide applies the mode to a tool call of type perm; cmd is the server's reading of
// the command it runs (nil when it runs none, or none could be read). It returns the
// verdict and the rule that gave it, worded for logs and for a decision's reason:
//
//	strict:     every call asks
//	balanced:   read calls run; write, command and other calls ask
//	permissive: every call runs except a command whose risk is high, critical or
//	            unknown, and a call of unknown type (PermissionAll), which ask
//
// A mode Decide does not know asks for everything, like strict.
func (m PermissionMode) Decide(perm PermissionType, cmd *CommandInfo) (PermissionVerdict, string) {
	switch m {
	case PermissionModeBalanced:
		if perm == PermissionRead {
			return VerdictAllow, "balanced mode lets reads, listings and searches run"
		}
		return VerdictAsk, "balanced mode asks for writes, commands and tools of other kinds"
	case PermissionModePermissive:
		switch {
		case cmd != nil && cmd.RiskLevel.Rank() >= RiskHigh.Rank():
			return VerdictAsk, fmt.Sprintf("permissive mode asks for %s-risk commands: %s", riskName(cmd.RiskLevel), cmd.Reason)
		case cmd != nil:
			return VerdictAllow, fmt.Sprintf("permissive mode lets %s-risk commands run: %s", cmd.RiskLevel, cmd.Reason)
		case perm == PermissionCommand:
			return VerdictAsk, "permissive mode asks for a command it cannot classify"
		case perm == PermissionAll:
			return VerdictAsk, "permissive mode asks for a tool of unknown kind, which may run a command"
		}
		return VerdictAllow, "permissive mode lets reads and writes run"
	case PermissionModeStrict:
		return VerdictAsk, "strict mode asks for every tool call"
	}
	return VerdictAsk, fmt.Sprintf("unknown permission mode %q asks for every tool call", m)
}

// riskName is a level for a message; an unknown one ranks, and reads, as unknown.
func riskName(l RiskLevel) string {
	switch l {
	case RiskHigh, RiskCritical:
		return string(l)
	}
	return "unknown"
}
