package acp

import (
	"reflect"
	"testing"

	"github.com/agenticd/agenticd/presenters"
)

const (
	oldModels    = `"models": {"currentModelId": "m1", "availableModels": [{"modelId": "m1", "name": "M1"}, {"modelId": "m2", "name": "M2"}]}`
	modelOptions = `"configOptions": [{"type": "select", "id": "model", "name": "Model", "category": "model", "currentValue": "small",
	  "options": [{"value": "small", "name": "Small"}, {"value": "large", "name": "Large"}]}]`
)

// Models are chosen through the config option of category model; agents that still
// advertise models the old way get session/set_model, also after the session was
// reopened with session/resume.
func TestModelsThroughConfigOptionsAndTheOldWay(t *testing.T) {
	for _, tc := range []struct {
		name, session string
		models        []string
		pick          string
		setModel      bool // the agent gets session/set_model
	}{
		{"config option", `{` + modelOptions + `}`, []string{"small", "large"}, "large", false},
		{"old way", `{` + oldModels + `}`, []string{"m1", "m2"}, "m2", true},
		{"config option wins", `{` + oldModels + `, ` + modelOptions + `}`, []string{"small", "large"}, "large", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config(`{"agent": {"resume": true}, "session": ` + tc.session + `}`)
			p := h.presenter(cfg)
			info := h.create(p)
			if got := idsOf(info.AvailableModels, func(m presenters.Model) string { return m.ID }); !reflect.DeepEqual(got, tc.models) || !info.Capabilities.SupportsModels {
				t.Fatalf("models %q, want %q", got, tc.models)
			}
			info, err := p.SetModel(testContext(t), info.SessionID, tc.pick)
			if err != nil || info.CurrentModelID != tc.pick {
				t.Fatalf("SetModel: %v, current %q", err, info.CurrentModelID)
			}
			closePresenter(t, p) // the agent's stderr is all logged then
			if sent := h.agentSaid("session/set_model "+info.AgentSessionID+" "+tc.pick) == 1; sent != tc.setModel {
				t.Fatalf("session/set_model sent: %v, want %v", sent, tc.setModel)
			}

			p = h.restart(p, cfg)
			reopened, err := p.LoadSession(testContext(t), info.SessionID, presenters.LoadContext{})
			if err != nil {
				t.Fatal(err)
			}
			if got := idsOf(reopened.AvailableModels, func(m presenters.Model) string { return m.ID }); !reflect.DeepEqual(got, tc.models) {
				t.Fatalf("models after session/resume %q, want %q", got, tc.models)
			}
		})
	}
}
