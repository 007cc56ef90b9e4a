package acp

import (
	"errors"
	"reflect"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

// Every config option the agent offers is listed with its value and choices, and set
// with session/set_config_option: a select to one of its values, a boolean to true or
// false; anything else is refused before the agent is asked.
func TestConfigOptionsAreListedAndSet(t *testing.T) {
	h := newHarness(t)
	p := h.presenter(h.config(`{"session": {"configOptions": [
  {"type": "select", "id": "effort", "name": "Effort", "category": "thought_level", "currentValue": "medium",
   "options": [{"group": "g", "name": "Levels", "options": [{"value": "low", "name": "Low"}, {"value": "medium", "name": "Medium", "description": "the default"}]}]},
  {"type": "boolean", "id": "fast", "name": "Fast mode", "currentValue": false}
 ]}}`))
	info := h.create(p)
	want := []presenters.ConfigOption{
		{ID: "effort", Name: "Effort", Category: "thought_level", Type: presenters.ConfigSelect, CurrentValue: "medium",
			Choices: []presenters.ConfigChoice{{Value: "low", Name: "Low", Group: "Levels"}, {Value: "medium", Name: "Medium", Description: "the default", Group: "Levels"}}},
		{ID: "fast", Name: "Fast mode", Type: presenters.ConfigBoolean, CurrentValue: "false"},
	}
	if !reflect.DeepEqual(info.ConfigOptions, want) {
		t.Fatalf("config options\n got %+v\nwant %+v", info.ConfigOptions, want)
	}

	ctx := testContext(t)
	from := h.rec.len()
	got, err := p.SetConfigOption(ctx, info.SessionID, "effort", "low")
	if err != nil || got.ConfigOptions[0].CurrentValue != "low" {
		t.Fatalf("set effort: %v, %+v", err, got.ConfigOptions)
	}
	h.rec.waitFrom(t, from, "the change as SESSION_UPDATED", func(ev presenters.Event) bool {
		u, ok := ev.Payload.(presenters.SessionUpdatedPayload)
		return ok && u.Patch.ConfigOptions != nil && (*u.Patch.ConfigOptions)[0].CurrentValue == "low"
	})
	if got, err = p.SetConfigOption(ctx, info.SessionID, "fast", "true"); err != nil || got.ConfigOptions[1].CurrentValue != "true" {
		t.Fatalf("set fast: %v, %+v", err, got.ConfigOptions)
	}
	for _, bad := range [][2]string{{"effort", "high"}, {"fast", "yes"}, {"nope", "1"}} {
		if _, err := p.SetConfigOption(ctx, info.SessionID, bad[0], bad[1]); !errors.Is(err, presenters.ErrInvalidArgument) {
			t.Errorf("set %s=%s: %v, want ErrInvalidArgument", bad[0], bad[1], err)
		}
	}
}
