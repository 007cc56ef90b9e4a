package acp

import (
	"context"
	"fmt"
	"slices"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agenticd/agenticd/presenters"
)

// A session's config options as clients see and set them: every option the agent
// offers, not only those of category mode or model (modes.go).

// configOptionsOf converts the agent's config options (booleans as "true"/"false").
func configOptionsOf(opts []sdk.SessionConfigOption) []presenters.ConfigOption {
	var out []presenters.ConfigOption
	for _, o := range opts {
		switch {
		case o.Select != nil:
			s := o.Select
			c := presenters.ConfigOption{ID: string(s.Id), Name: s.Name, Description: deref(s.Description),
				Category: string(deref(s.Category)), Type: presenters.ConfigSelect, CurrentValue: string(s.CurrentValue)}
			switch {
			case s.Options.Ungrouped != nil:
				for _, v := range *s.Options.Ungrouped {
					c.Choices = append(c.Choices, presenters.ConfigChoice{Value: string(v.Value), Name: v.Name, Description: deref(v.Description)})
				}
			case s.Options.Grouped != nil:
				for _, g := range *s.Options.Grouped {
					for _, v := range g.Options {
						c.Choices = append(c.Choices, presenters.ConfigChoice{Value: string(v.Value), Name: v.Name,
							Description: deref(v.Description), Group: g.Name})
					}
				}
			}
			out = append(out, c)
		case o.Boolean != nil:
			b := o.Boolean
			out = append(out, presenters.ConfigOption{ID: string(b.Id), Name: b.Name, Description: deref(b.Description),
				Category: string(deref(b.Category)), Type: presenters.ConfigBoolean, CurrentValue: fmt.Sprint(b.CurrentValue)})
		}
	}
	return out
}

// setConfigOptionValue sets one of the session's config options to value, checked
// against what the session offers: a select's choice, or "true"/"false" for a boolean.
func (s *session) setConfigOptionValue(ctx context.Context, configID, value string) error {
	s.mu.Lock()
	i := slices.IndexFunc(s.info.ConfigOptions, func(o presenters.ConfigOption) bool { return o.ID == configID })
	if i < 0 {
		ids := idsOf(s.info.ConfigOptions, func(o presenters.ConfigOption) string { return o.ID })
		s.mu.Unlock()
		return fmt.Errorf("config option %q is not one of the session's (%s): %w", configID, idList(ids), presenters.ErrInvalidArgument)
	}
	opt := s.info.ConfigOptions[i]
	conn, acpID, err := s.liveConnLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	req := sdk.SetSessionConfigOptionRequest{}
	switch opt.Type {
	case presenters.ConfigBoolean:
		if value != "true" && value != "false" {
			return fmt.Errorf("config option %q is on or off: its value is true or false, not %q: %w", configID, value, presenters.ErrInvalidArgument)
		}
		req.Boolean = &sdk.SetSessionConfigOptionBoolean{SessionId: acpID, ConfigId: sdk.SessionConfigId(configID), Type: "boolean", Value: value == "true"}
	default:
		values := idsOf(opt.Choices, func(c presenters.ConfigChoice) string { return c.Value })
		if !slices.Contains(values, value) {
			return fmt.Errorf("value %q is not one of config option %q's (%s): %w", value, configID, idList(values), presenters.ErrInvalidArgument)
		}
		req.ValueId = &sdk.SetSessionConfigOptionValueId{SessionId: acpID, ConfigId: sdk.SessionConfigId(configID), Value: sdk.SessionConfigValueId(value)}
	}
	return s.sendConfigOption(ctx, conn, req)
}
