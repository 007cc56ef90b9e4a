//go:build !linux

package confine

// Group is a control group of its own for one confined tree; this system has none.
type Group struct{}

// NewGroup returns nil: only Linux has control groups.
func NewGroup(l Limits) (*Group, error) { return nil, l.Check() }

// Remove does nothing.
func (g *Group) Remove() {}

func (g *Group) paths() []string { return nil }
