package acp

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// Session updates of kinds the SDK's types (v0.13.5) do not know: notices, context
// compaction reports and plan operations. agentReader decodes them itself (extUpdateOf)
// and hands them on through extUpdater; the normalizer shows notices and compaction as
// action blocks of the message, never as its text, and a plan as the plan block.

// Kinds of extension updates.
const (
	updateNotice            = "notice"
	updateCompaction        = "compaction_update"
	updateCompactionSummary = "compaction_summary_chunk"
	updatePlanUpdate        = "plan_update"
)

var extKinds = []string{updateNotice, updateCompaction, updateCompactionSummary, updatePlanUpdate}

// Action types of the blocks that show them.
const (
	actionNotice     = "notice"
	actionCompaction = "compaction"
)

// extUpdate is one such update: the fields of every kind, as the schema names them.
type extUpdate struct {
	Kind string `json:"sessionUpdate"`
	// notice
	Severity    string `json:"severity"`
	Title       string `json:"title"`
	Description string `json:"description"`
	// compaction_update and compaction_summary_chunk
	CompactionID string             `json:"compactionId"`
	Status       string             `json:"status"`
	Summary      []sdk.ContentBlock `json:"summary"`
	Error        string             `json:"error"`
	Content      *sdk.ContentBlock  `json:"content"`
	// plan_update: a plan as items, as markdown, or as a file.
	Plan *struct {
		Type    string          `json:"type"`
		PlanID  string          `json:"planId"`
		Entries []sdk.PlanEntry `json:"entries"`
		Content string          `json:"content"`
		URI     string          `json:"uri"`
	} `json:"plan"`
}

// extUpdater takes the extension updates of a connection's sessions; the connection's
// sdk.Client is one.
type extUpdater interface {
	extUpdate(sessionID sdk.SessionId, u extUpdate)
}

// extUpdateOf decodes a session/update's params if its kind is an extension kind. The
// words are looked for first, so other updates are not decoded twice.
func extUpdateOf(params json.RawMessage) (sdk.SessionId, extUpdate, bool) {
	if !bytes.Contains(params, []byte(updateNotice)) && !bytes.Contains(params, []byte("compaction_")) &&
		!bytes.Contains(params, []byte(updatePlanUpdate)) {
		return "", extUpdate{}, false
	}
	var n struct {
		SessionID sdk.SessionId `json:"sessionId"`
		Update    extUpdate     `json:"update"`
	}
	if json.Unmarshal(params, &n) != nil || n.SessionID == "" || !slices.Contains(extKinds, n.Update.Kind) {
		return "", extUpdate{}, false
	}
	return n.SessionID, n.Update, true
}

// ext normalizes an extension update.
func (n *normalizer) ext(u extUpdate, emit emitFunc) {
	msg := n.target(presenters.RoleAssistant, nil, emit)
	if msg == nil {
		n.drop(u.Kind)
		return
	}
	action := func(actionType, description string) {
		b := presenters.Block{Type: presenters.BlockAction, Action: &presenters.ActionBlock{ActionType: actionType, Description: description}}
		msg.appendBlock(b)
		emit(presenters.MessageBlockPayload{MessageID: msg.id, Role: msg.role, Block: b})
	}
	switch u.Kind {
	case updateNotice:
		action(actionNotice, noticeText(u.Severity, u.Title, u.Description))
	case updateCompactionSummary:
		if u.Content != nil && u.Content.Text != nil {
			if n.compactionSummaries == nil {
				n.compactionSummaries = map[string]string{}
			}
			n.compactionSummaries[u.CompactionID] += u.Content.Text.Text
		}
	case updateCompaction:
		summary := n.compactionSummaries[u.CompactionID]
		if len(u.Summary) > 0 {
			var b strings.Builder
			for _, c := range u.Summary {
				if c.Text != nil {
					b.WriteString(c.Text.Text)
				}
			}
			summary = b.String()
		}
		switch u.Status {
		case "in_progress":
			action(actionCompaction, "Compacting the conversation")
			return
		case "completed":
			text := "Compacted the conversation"
			if summary != "" {
				text += ". Summary:\n" + summary
			}
			action(actionCompaction, text)
		case "failed":
			action(actionCompaction, strings.TrimSuffix("Compacting the conversation failed: "+u.Error, ": "))
		default:
			action(actionCompaction, "Compacting the conversation ended: "+u.Status)
		}
		delete(n.compactionSummaries, u.CompactionID)
	case updatePlanUpdate:
		if u.Plan == nil {
			return
		}
		plan := presenters.PlanBlock{}
		switch u.Plan.Type {
		case "items":
			for _, e := range u.Plan.Entries {
				plan.Entries = append(plan.Entries, presenters.PlanEntry{Content: e.Content, Status: string(e.Status), Priority: string(e.Priority)})
			}
		case "markdown":
			// agenticd's plan is a list of entries: a plan written as text is one entry.
			plan.Entries = []presenters.PlanEntry{{Content: u.Plan.Content}}
		case "file":
			plan.Entries = []presenters.PlanEntry{{Content: u.Plan.URI}}
		default:
			n.log.Info("skipping a plan of a type this server does not know", "session_id", n.sessionID, "type", u.Plan.Type)
			return
		}
		msg.setPlan(plan)
		emit(presenters.MessageBlockPayload{MessageID: msg.id, Role: msg.role, Block: presenters.Block{Type: presenters.BlockPlan, Plan: &plan}})
	}
}

// noticeText is a notice as one text: its severity (unless info), title, description.
func noticeText(severity, title, description string) string {
	text := title
	if severity != "" && severity != "info" {
		text = severity + ": " + text
	}
	if description != "" {
		text += "\n" + description
	}
	return text
}

// informationalNotice reads a notice that claude-agent-acp sends as message text, for
// clients that do not declare notices: its _meta.claudeCode.kind is "informational".
func informationalNotice(meta map[string]any) bool {
	cc, _ := meta["claudeCode"].(map[string]any)
	kind, _ := cc["kind"].(string)
	return kind == "informational"
}
