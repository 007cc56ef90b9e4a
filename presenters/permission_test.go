package presenters

import (
	"errors"
	"strings"
	"testing"
)

func TestPermissionModeDecide(t *testing.T) {
	low := &CommandInfo{RiskLevel: RiskLow, Reason: "lists files"}
	medium := &CommandInfo{RiskLevel: RiskMedium, Reason: "runs tests"}
	high := &CommandInfo{RiskLevel: RiskHigh, Reason: "deletes recursively"}
	critical := &CommandInfo{RiskLevel: RiskCritical, Reason: "deletes the root"}
	unrated := &CommandInfo{RiskLevel: "", Reason: ""}
	const ask, allow = VerdictAsk, VerdictAllow
	for _, c := range []struct {
		mode PermissionMode
		perm PermissionType
		cmd  *CommandInfo
		want PermissionVerdict
	}{
		{PermissionModeStrict, PermissionRead, nil, ask},
		{PermissionModeStrict, PermissionWrite, nil, ask},
		{PermissionModeStrict, PermissionCommand, low, ask},
		{PermissionModeStrict, PermissionAll, nil, ask},

		{PermissionModeBalanced, PermissionRead, nil, allow},
		{PermissionModeBalanced, PermissionWrite, nil, ask},
		{PermissionModeBalanced, PermissionCommand, low, ask},
		{PermissionModeBalanced, PermissionCommand, medium, ask},
		{PermissionModeBalanced, PermissionAll, nil, ask},

		{PermissionModePermissive, PermissionRead, nil, allow},
		{PermissionModePermissive, PermissionWrite, nil, allow},
		{PermissionModePermissive, PermissionCommand, low, allow},
		{PermissionModePermissive, PermissionCommand, medium, allow},
		{PermissionModePermissive, PermissionCommand, high, ask},
		{PermissionModePermissive, PermissionCommand, critical, ask},
		{PermissionModePermissive, PermissionCommand, unrated, ask}, // an unknown level ranks critical
		{PermissionModePermissive, PermissionCommand, nil, ask},     // a command nobody could read
		{PermissionModePermissive, PermissionAll, nil, ask},         // a tool of unknown kind
		{PermissionModePermissive, PermissionAll, medium, allow},    // ...whose command was read

		{"", PermissionRead, nil, ask},
		{"yolo", PermissionRead, nil, ask},
	} {
		got, rule := c.mode.Decide(c.perm, c.cmd)
		if got != c.want {
			t.Errorf("%q.Decide(%s, %+v) = %s (%s), want %s", c.mode, c.perm, c.cmd, got, rule, c.want)
		}
		if rule == "" {
			t.Errorf("%q.Decide(%s, %+v): no rule given", c.mode, c.perm, c.cmd)
		}
	}
	// The rule carries the classifier's reason, for the decision a client shows.
	if _, rule := PermissionModePermissive.Decide(PermissionCommand, high); !strings.Contains(rule, "high-risk") || !strings.Contains(rule, high.Reason) {
		t.Errorf("rule %q: want the risk level and the classifier's reason", rule)
	}
}

func TestParsePermissionMode(t *testing.T) {
	for _, name := range []string{"strict", "balanced", "permissive"} {
		if m, err := ParsePermissionMode(name); err != nil || string(m) != name {
			t.Errorf("ParsePermissionMode(%q) = %q, %v", name, m, err)
		}
	}
	for _, bad := range []string{"", "Strict", "ask", "auto"} {
		_, err := ParsePermissionMode(bad)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "strict, balanced, permissive") {
			t.Errorf("ParsePermissionMode(%q) = %v, want ErrInvalidArgument naming the modes", bad, err)
		}
	}
}
