package store

import (
	"encoding/json"
	"fmt"

	"github.com/agenticd/agenticd/presenters"
)

// Token usage as stored: a message's usage is JSON (storedUsage), a conversation's is
// columns plus usage_reported. Before usage told "not reported" from zero, a zero count
// meant "not reported": rows of that time read that way.

// storedUsage is a message's usage column. Explicit marks rows written since counts may
// be absent: absent keys are unreported counts, zeros are real. Rows without it hold
// every count, zero meaning unreported.
type storedUsage struct {
	InputTokens       *int64   `json:"InputTokens,omitempty"`
	OutputTokens      *int64   `json:"OutputTokens,omitempty"`
	TotalTokens       *int64   `json:"TotalTokens,omitempty"`
	CachedInputTokens *int64   `json:"CachedInputTokens,omitempty"`
	ReasoningTokens   *int64   `json:"ReasoningTokens,omitempty"`
	ContextUsed       *int64   `json:"ContextUsed,omitempty"`
	ContextSize       *int64   `json:"ContextSize,omitempty"`
	Cost              *float64 `json:"Cost,omitempty"`
	CostCurrency      string   `json:"CostCurrency,omitempty"`
	Explicit          bool     `json:"Explicit,omitempty"`
}

// encodeUsage is the usage column of a message.
func encodeUsage(u presenters.TokenUsage) (string, error) {
	data, err := json.Marshal(storedUsage{
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		CachedInputTokens: u.CachedInputTokens, ReasoningTokens: u.ReasoningTokens,
		ContextUsed: u.ContextUsed, ContextSize: u.ContextSize, Cost: u.Cost,
		CostCurrency: u.CostCurrency, Explicit: true,
	})
	return string(data), err
}

// decodeUsage reads a message's usage column, of this release or an older one.
func decodeUsage(messageID, column string) (*presenters.TokenUsage, error) {
	var s storedUsage
	if err := json.Unmarshal([]byte(column), &s); err != nil {
		return nil, fmt.Errorf("read message %s: usage: %w", messageID, err)
	}
	u := presenters.TokenUsage{
		InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, TotalTokens: s.TotalTokens,
		CachedInputTokens: s.CachedInputTokens, ReasoningTokens: s.ReasoningTokens,
		ContextUsed: s.ContextUsed, ContextSize: s.ContextSize, Cost: s.Cost, CostCurrency: s.CostCurrency,
	}
	if !s.Explicit {
		for _, c := range []**int64{&u.InputTokens, &u.OutputTokens, &u.TotalTokens, &u.CachedInputTokens,
			&u.ReasoningTokens, &u.ContextUsed, &u.ContextSize} {
			*c = nonZero(*c)
		}
		u.Cost = nonZero(u.Cost)
	}
	return &u, nil
}

func nonZero[T int64 | float64](v *T) *T {
	if v == nil || *v == 0 {
		return nil
	}
	return v
}

// The bits of a conversation's usage_reported column: which counts were reported.
const (
	reportedInput = 1 << iota
	reportedOutput
	reportedTotal
	reportedCachedInput
	reportedReasoning
	reportedContextUsed
	reportedContextSize
	reportedCost
)

// usageColumns are a conversation's usage columns, in conversationColumns' order:
// the counts (0 when not reported) and usage_reported.
func usageColumns(u presenters.TokenUsage) []any {
	var reported int64
	count := func(v *int64, bit int64) int64 {
		if v == nil {
			return 0
		}
		reported |= bit
		return *v
	}
	cols := []any{
		count(u.InputTokens, reportedInput), count(u.OutputTokens, reportedOutput),
		count(u.TotalTokens, reportedTotal), count(u.CachedInputTokens, reportedCachedInput),
		count(u.ReasoningTokens, reportedReasoning), count(u.ContextUsed, reportedContextUsed),
		count(u.ContextSize, reportedContextSize),
	}
	var cost float64
	if u.Cost != nil {
		cost, reported = *u.Cost, reported|reportedCost
	}
	return append(cols, cost, u.CostCurrency, reported)
}

// usage is the conversation's usage from its columns. A row without usage_reported
// (NULL: written before it existed) reports its non-zero counts.
func (r conversationRow) usage() presenters.TokenUsage {
	reported := func(v int64, bit int64) *int64 {
		if r.UsageReported.Valid && r.UsageReported.Int64&bit == 0 || !r.UsageReported.Valid && v == 0 {
			return nil
		}
		return presenters.Reported(v)
	}
	u := presenters.TokenUsage{
		InputTokens:       reported(r.UsageInputTokens, reportedInput),
		OutputTokens:      reported(r.UsageOutputTokens, reportedOutput),
		TotalTokens:       reported(r.UsageTotalTokens, reportedTotal),
		CachedInputTokens: reported(r.UsageCachedInputTokens, reportedCachedInput),
		ReasoningTokens:   reported(r.UsageReasoningTokens, reportedReasoning),
		ContextUsed:       reported(r.UsageContextUsed, reportedContextUsed),
		ContextSize:       reported(r.UsageContextSize, reportedContextSize),
		CostCurrency:      r.UsageCostCurrency,
	}
	if r.UsageReported.Valid && r.UsageReported.Int64&reportedCost != 0 || !r.UsageReported.Valid && r.UsageCost != 0 {
		u.Cost = presenters.Reported(r.UsageCost)
	}
	return u
}
