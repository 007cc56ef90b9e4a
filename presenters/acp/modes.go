package acp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// A session's modes and models, and the config options that may carry them.

// deriveModesModels fills info's modes and models from what the agent said: modes
// from session modes, else a config option of category mode; models from a config
// option of category model, else the models agents advertised before config options
// (s.mu held). It lists every config option too.
func (s *session) deriveModesModels() {
	modeOpt := s.configOption(sdk.SessionConfigOptionCategoryMode)
	modelOpt := s.configOption(sdk.SessionConfigOptionCategoryModel)
	switch {
	case s.modeState != nil:
		modes := make([]presenters.Mode, 0, len(s.modeState.AvailableModes))
		for _, m := range s.modeState.AvailableModes {
			modes = append(modes, presenters.Mode{ID: string(m.Id), Name: m.Name, Description: deref(m.Description)})
		}
		s.info.AvailableModes, s.info.CurrentModeID = modes, string(s.modeState.CurrentModeId)
	case modeOpt != nil:
		var modes []presenters.Mode
		for _, o := range selectOptions(modeOpt) {
			modes = append(modes, presenters.Mode{ID: string(o.Value), Name: o.Name, Description: deref(o.Description)})
		}
		s.info.AvailableModes, s.info.CurrentModeID = modes, string(modeOpt.CurrentValue)
	}
	switch {
	case modelOpt != nil:
		var models []presenters.Model
		for _, o := range selectOptions(modelOpt) {
			models = append(models, presenters.Model{ID: string(o.Value), Name: o.Name, Description: deref(o.Description)})
		}
		s.info.AvailableModels, s.info.CurrentModelID = models, string(modelOpt.CurrentValue)
	case s.modelState != nil:
		models := make([]presenters.Model, 0, len(s.modelState.AvailableModels))
		for _, m := range s.modelState.AvailableModels {
			models = append(models, presenters.Model{ID: m.ModelID, Name: m.Name, Description: deref(m.Description)})
		}
		s.info.AvailableModels, s.info.CurrentModelID = models, s.modelState.CurrentModelID
	}
	s.info.Capabilities.SupportsModes = len(s.info.AvailableModes) > 0
	s.info.Capabilities.SupportsModels = len(s.info.AvailableModels) > 0
	s.info.ConfigOptions = configOptionsOf(s.configs)
}

// configOption returns the first select option of a category (s.mu held).
func (s *session) configOption(cat sdk.SessionConfigOptionCategory) *sdk.SessionConfigOptionSelect {
	for _, o := range s.configs {
		if o.Select != nil && o.Select.Category != nil && *o.Select.Category == cat {
			return o.Select
		}
	}
	return nil
}

func selectOptions(o *sdk.SessionConfigOptionSelect) []sdk.SessionConfigSelectOption {
	switch {
	case o.Options.Ungrouped != nil:
		return *o.Options.Ungrouped
	case o.Options.Grouped != nil:
		var out []sdk.SessionConfigSelectOption
		for _, g := range *o.Options.Grouped {
			out = append(out, g.Options...)
		}
		return out
	}
	return nil
}

// choice is one of the session's selections a client switches: its mode or its model.
// Both are checked against what the session offers, then set through a config option
// of their category when that is where the session's list comes from (see
// deriveModesModels), else through the agent's own method.
type choice struct {
	what     string // "mode" or "model"
	category sdk.SessionConfigOptionCategory
	method   string // the agent's own method, for errors
	// offered lists the ids the session offers; viaOption reports whether a config
	// option of category is to be used when there is one (s.mu held).
	offered   func(s *session) []string
	viaOption func(s *session) bool
	call      func(ctx context.Context, conn *agentConn, acpID sdk.SessionId, id string) error
	// record notes that the agent took id through its own method (s.mu held).
	record func(s *session, id string)
}

var (
	modeChoice = choice{
		what: "mode", category: sdk.SessionConfigOptionCategoryMode, method: "set_mode",
		offered: func(s *session) []string {
			return idsOf(s.info.AvailableModes, func(m presenters.Mode) string { return m.ID })
		},
		viaOption: func(s *session) bool { return s.modeState == nil },
		call: func(ctx context.Context, conn *agentConn, acpID sdk.SessionId, id string) error {
			_, err := conn.rpc.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: acpID, ModeId: sdk.SessionModeId(id)})
			return err
		},
		record: (*session).setCurrentModeLocked,
	}
	modelChoice = choice{
		what: "model", category: sdk.SessionConfigOptionCategoryModel, method: "set_model",
		offered: func(s *session) []string {
			return idsOf(s.info.AvailableModels, func(m presenters.Model) string { return m.ID })
		},
		viaOption: func(*session) bool { return true },
		call: func(ctx context.Context, conn *agentConn, acpID sdk.SessionId, id string) error {
			return conn.setLegacyModel(ctx, acpID, id)
		},
		record: (*session).setCurrentModelLocked,
	}
)

// setMode switches the session's mode: session/set_mode, or the config option of
// category mode when the agent has no session modes.
// askingMode is the mode a new session of a known agent is switched to so that its tool
// calls reach agenticd's policy (knownAgent.askingModes): "" when the agent is not known,
// offers none of them, or is in one already.
func (s *session) askingMode() string {
	s.p.mu.Lock()
	known := s.p.launchConfigLocked().known
	s.p.mu.Unlock()
	if known == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range known.askingModes {
		if slices.ContainsFunc(s.info.AvailableModes, func(m presenters.Mode) bool { return m.ID == id }) {
			if id == s.info.CurrentModeID {
				return ""
			}
			return id
		}
	}
	return ""
}

func (s *session) setMode(ctx context.Context, modeID string) error {
	return s.choose(ctx, modeChoice, modeID)
}

// setModel switches the model: the config option of category model, else the
// unstable session/set_model of agents that advertise models the old way.
func (s *session) setModel(ctx context.Context, modelID string) error {
	return s.choose(ctx, modelChoice, modelID)
}

// choose sets one of the session's choices to id.
func (s *session) choose(ctx context.Context, c choice, id string) error {
	s.mu.Lock()
	if err := c.unoffered(s, id, "session"); err != nil {
		s.mu.Unlock()
		return err
	}
	conn, acpID, err := s.liveConnLocked()
	if err != nil {
		s.mu.Unlock()
		return err
	}
	var configID sdk.SessionConfigId
	if c.viaOption(s) {
		if opt := s.configOption(c.category); opt != nil {
			configID = opt.Id
		}
	}
	s.mu.Unlock()
	if configID != "" {
		return s.setConfigOption(ctx, conn, acpID, configID, id)
	}
	if err := c.call(ctx, conn, acpID, id); err != nil {
		return s.agentCallError(conn, c.method, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.info
	c.record(s, id)
	s.deriveModesModels()
	s.publishPatch(old)
	return nil
}

// setCurrentModeLocked records the current mode: in the agent's session modes, or
// as it stands when the agent has none (s.mu held).
func (s *session) setCurrentModeLocked(id string) {
	if s.modeState == nil {
		s.info.CurrentModeID = id
		return
	}
	ms := *s.modeState
	ms.CurrentModeId = sdk.SessionModeId(id)
	s.modeState = &ms
}

// setCurrentModelLocked records the current model in the agent's session models
// (s.mu held).
func (s *session) setCurrentModelLocked(id string) {
	if s.modelState == nil {
		return
	}
	ms := *s.modelState
	ms.CurrentModelID = id
	s.modelState = &ms
}

func (s *session) setConfigOption(ctx context.Context, conn *agentConn, acpID sdk.SessionId, id sdk.SessionConfigId, value string) error {
	return s.sendConfigOption(ctx, conn, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
		SessionId: acpID, ConfigId: id, Value: sdk.SessionConfigValueId(value),
	}})
}

// sendConfigOption sends session/set_config_option and takes the options it answers with.
func (s *session) sendConfigOption(ctx context.Context, conn *agentConn, req sdk.SetSessionConfigOptionRequest) error {
	resp, err := conn.rpc.SetSessionConfigOption(ctx, req)
	if err != nil {
		return s.agentCallError(conn, "set_config_option", err)
	}
	opts := resp.ConfigOptions
	s.applyChangeAndPublish(&sessionChange{configOptions: &opts})
	return nil
}

func (s *session) applyChangeAndPublish(ch *sessionChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.info
	s.applyChange(ch)
	s.publishPatch(old)
}

// checkModeModelLocked fails for a mode or model id the session does not offer (s.mu held).
func (s *session) checkModeModelLocked(modeID, modelID string) error {
	if modeID != "" {
		if err := modeChoice.unoffered(s, modeID, "agent"); err != nil {
			return err
		}
	}
	if modelID != "" {
		return modelChoice.unoffered(s, modelID, "agent")
	}
	return nil
}

// unoffered says why id is not one of the session's choices of c, if it is not;
// whose names the list in the error (s.mu held).
func (c choice) unoffered(s *session, id, whose string) error {
	offered := c.offered(s)
	if slices.Contains(offered, id) {
		return nil
	}
	return fmt.Errorf("%s %q is not one of the %s's %ss (%s): %w", c.what, id, whose, c.what, idList(offered), presenters.ErrInvalidArgument)
}

func idsOf[T any](list []T, key func(T) string) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = key(v)
	}
	return out
}

// idList lists offered ids for an error message.
func idList(ids []string) string {
	if len(ids) == 0 {
		return "none offered"
	}
	return strings.Join(ids, ", ")
}
