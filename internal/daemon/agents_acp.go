package daemon

import (
	"context"

	"github.com/agenticd/agenticd/presenters"
)

// acpPresenters builds the ACP agents of the config; presenters/acp wires here.
func acpPresenters(ctx context.Context, cfg Config, deps Deps) ([]presenters.Presenter, error) {
	return nil, nil
}
