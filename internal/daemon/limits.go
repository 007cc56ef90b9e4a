package daemon

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/sandbox"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// LimitsConfig bounds one confined process tree: an agent and everything it starts, a
// terminal, a command. At the top level it sets the bounds of every tree; in an acp
// agent's entry it overrides them, key by key, for that agent's own tree. Keys left out
// keep the default (confine.DefaultLimits). They apply only under confinement.
type LimitsConfig struct {
	// Processes caps the tree's processes and threads at once (default 4096), or
	// "unlimited".
	Processes string `yaml:"processes"`
	// Memory caps each process's data and, where agenticd may create a memory cgroup
	// (as root), the whole tree's memory: a size such as 4GiB or 512MiB (default 4GiB),
	// or "unlimited".
	Memory string `yaml:"memory"`
	// FileSize caps the size of a file the tree writes (default 1GiB), or "unlimited".
	FileSize string `yaml:"file_size"`
	// Nice lowers the tree's CPU priority: 0 (the default, unchanged) to 19 (lowest).
	Nice string `yaml:"nice"`
}

// NetworkConfig is an acp agent's egress policy: with it, the agent's tree may open TCP
// connections only to the listed ports (on any host: Landlock cannot tell hosts apart),
// and every other TCP connection is refused, loopback services included. UDP, and so
// DNS, is not restricted. It needs Landlock ABI 4 (Linux 6.7); without it the policy is
// not enforced, and with confinement: on the agent does not start.
type NetworkConfig struct {
	// AllowTCPPorts are the TCP ports the agent may connect to; [] refuses every TCP
	// connection.
	AllowTCPPorts []int `yaml:"allow_tcp_ports"`
}

// unlimited is the value that lifts a limit.
const unlimited = "unlimited"

// resolve applies c over base, key by key.
func (c LimitsConfig) resolve(base sandbox.Limits) (sandbox.Limits, error) {
	out := base
	if c.Processes != "" {
		n, err := parseCount(c.Processes)
		if err != nil {
			return out, fmt.Errorf("limits.processes: %w", err)
		}
		out.Processes = n
	}
	if c.Memory != "" {
		n, err := parseSize(c.Memory)
		if err != nil {
			return out, fmt.Errorf("limits.memory: %w", err)
		}
		out.Memory = n
	}
	if c.FileSize != "" {
		n, err := parseSize(c.FileSize)
		if err != nil {
			return out, fmt.Errorf("limits.file_size: %w", err)
		}
		out.FileSize = n
	}
	if c.Nice != "" {
		n, err := strconv.Atoi(c.Nice)
		if err != nil || n < 0 || n > 19 {
			return out, fmt.Errorf("limits.nice: %q is not a whole number from 0 (unchanged priority) to 19 (lowest)", c.Nice)
		}
		out.Nice = n
	}
	return out, nil
}

// parseCount reads a positive count or "unlimited" (0).
func parseCount(s string) (int, error) {
	if s == unlimited {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive number; give how many processes and threads the tree may run at once (e.g. 4096), or unlimited", s)
	}
	return n, nil
}

// sizeUnits are the units a size may carry: binary, as the kernel counts.
var sizeUnits = []struct {
	suffix string
	size   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}}

// parseSize reads a size: a positive number of bytes, optionally with a binary unit
// (512MiB, 4 GiB), or "unlimited" (0).
func parseSize(s string) (int64, error) {
	if s == unlimited {
		return 0, nil
	}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size; write a positive whole number of KiB, MiB, GiB or TiB (e.g. 4GiB, 512MiB), of bytes, or unlimited", s)
	}
	return n * mult, nil
}

// network reads the policy; nil leaves the network open.
func (n *NetworkConfig) network() (*sandbox.Network, error) {
	if n == nil {
		return nil, nil
	}
	if n.AllowTCPPorts == nil {
		return nil, fmt.Errorf("network: list the TCP ports the agent may connect to in allow_tcp_ports (e.g. [443]; [] refuses every TCP connection), or remove network to leave it open")
	}
	out := &sandbox.Network{AllowTCPPorts: []uint16{}}
	for _, p := range n.AllowTCPPorts {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("network.allow_tcp_ports: %d is not a TCP port (1 to 65535)", p)
		}
		out.AllowTCPPorts = append(out.AllowTCPPorts, uint16(p))
	}
	return out, nil
}

// treeLimits are the bounds of every confined tree without its own: the defaults with
// the top-level limits over them.
func (c Config) treeLimits() (sandbox.Limits, error) {
	return c.Limits.resolve(confine.DefaultLimits)
}

// agentLimits are an acp agent's own bounds, nil when its entry sets none (it then
// gets the top-level ones).
func (c Config) agentLimits(a AgentConfig) (*sandbox.Limits, error) {
	if a.Limits == (LimitsConfig{}) {
		return nil, nil
	}
	base, err := c.treeLimits()
	if err != nil {
		return nil, err
	}
	l, err := a.Limits.resolve(base)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// validateBounds checks an agent's limits and network policy.
func (c Config) validateBounds(a AgentConfig) error {
	if a.Type != presenters.AgentTypeACP && (a.Limits != (LimitsConfig{}) || a.Network != nil) {
		return fmt.Errorf("agent %q: limits and network apply to acp agents only; a DeepChat agent's commands run under the top-level limits: remove them", a.ID)
	}
	if _, err := c.agentLimits(a); err != nil {
		return fmt.Errorf("agent %q: %w", a.ID, err)
	}
	if _, err := a.Network.network(); err != nil {
		return fmt.Errorf("agent %q: %w", a.ID, err)
	}
	if a.Network != nil {
		if mode, _ := sandbox.ParseConfinementMode(c.Confinement); mode == sandbox.ConfineOff {
			return fmt.Errorf("agent %q: network needs confinement, which is off: set confinement to auto or on, or remove network", a.ID)
		}
	}
	return nil
}
