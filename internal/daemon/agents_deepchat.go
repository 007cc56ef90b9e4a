package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/deepchat"
	"github.com/agenticd/agenticd/presenters/transcript"
)

// DefaultDeepChatID is the DeepChat agent that is always registered; with no agents:
// entry of that id it lists itself as needing configuration.
const DefaultDeepChatID = "deepchat.default"

// deepchatPresenters builds the DeepChat agents of the config, plus deepchat.default when
// the config has no entry for it. Before any agent serves, it marks the replies a crash
// left in progress as incomplete (the whole history database, every agent's).
func deepchatPresenters(ctx context.Context, cfg Config, deps Deps) ([]presenters.Presenter, error) {
	logger := deps.Logger
	if logger == nil {
		logger = slog.Default()
	}
	store, err := transcript.New(ctx, deps.DB)
	if err != nil {
		return nil, fmt.Errorf("history database: %w", err)
	}
	n, err := store.MarkInterrupted(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		logger.Warn("replies interrupted by the last shutdown are kept as incomplete", "messages", n)
	}
	var out []presenters.Presenter
	add := func(c deepchat.Config) error {
		p, err := deepchat.New(c, deepchat.Deps{Publisher: deps.Publisher, Roots: deps.Roots, Store: store, Logger: logger})
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	}
	haveDefault := false
	for _, a := range cfg.Agents {
		if a.Type != presenters.AgentTypeDeepChat {
			continue
		}
		if len(a.MCPServers) > 0 {
			logger.Warn("mcp_servers are not supported by deepchat agents yet and are ignored", "agent_id", a.ID)
		}
		haveDefault = haveDefault || a.ID == DefaultDeepChatID
		err := add(deepchat.Config{
			ID: a.ID, Provider: a.Provider, BaseURL: a.BaseURL, APIKeyEnv: a.APIKeyEnv,
			Models: a.Models, DefaultModel: a.DefaultModel, MaxToolRounds: a.MaxToolRounds,
			CommandTimeout: a.CommandTimeout, PermissionTimeout: a.PermissionTimeout,
			ProviderIdleTimeout: a.ProviderIdleTimeout,
		})
		if err != nil {
			return out, err
		}
	}
	if !haveDefault {
		if err := add(deepchat.Config{ID: DefaultDeepChatID}); err != nil {
			return out, err
		}
	}
	return out, nil
}
