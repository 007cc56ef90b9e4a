package daemon

import (
	"strings"
	"testing"

	"github.com/agenticd/agenticd/sandbox"
)

// loadValid loads a config file and validates it.
func loadValid(t *testing.T, yaml string) (Config, error) {
	t.Helper()
	cfg, err := Load(writeFile(t, yaml))
	if err != nil {
		return cfg, err
	}
	if cfg, err = cfg.WithDefaults(); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// The top-level limits replace the defaults key by key, and an acp agent's replace the
// top-level ones key by key; its network policy lists ports.
func TestLimitsResolveKeyByKey(t *testing.T) {
	cfg, err := loadValid(t, `
limits: {processes: 512, memory: 2GiB}
agents:
  - id: acp.x.y
    type: acp
    command: /bin/true
    limits: {memory: unlimited, file_size: 512 MiB, nice: 5}
    network: {allow_tcp_ports: [443, 8443]}
  - id: acp.x.z
    type: acp
    command: /bin/true
    network: {allow_tcp_ports: []}
`)
	if err != nil {
		t.Fatal(err)
	}
	top, _ := cfg.treeLimits()
	if want := (sandbox.Limits{Processes: 512, Memory: 2 << 30, FileSize: 1 << 30}); top != want {
		t.Errorf("top-level limits %+v, want %+v", top, want)
	}
	agent, _ := cfg.agentLimits(cfg.Agents[0])
	if want := (sandbox.Limits{Processes: 512, FileSize: 512 << 20, Nice: 5}); agent == nil || *agent != want {
		t.Errorf("agent limits %+v, want %+v", agent, want)
	}
	if l, _ := cfg.agentLimits(cfg.Agents[1]); l != nil {
		t.Errorf("an agent without limits got its own: %+v", l)
	}
	if n, _ := cfg.Agents[0].Network.network(); n == nil || len(n.AllowTCPPorts) != 2 {
		t.Errorf("network %+v", n)
	}
	if n, _ := cfg.Agents[1].Network.network(); n == nil || len(n.AllowTCPPorts) != 0 {
		t.Errorf("allow_tcp_ports: [] gave %+v, want a policy refusing every port", n)
	}
}

// Each mistake is refused with what to write instead.
func TestLimitsErrorsHelp(t *testing.T) {
	agent := "agents:\n  - id: acp.x.y\n    type: acp\n    command: /bin/true\n"
	cases := []struct{ name, yaml, says string }{
		{"size unit", "limits: {memory: 4GB}\n", `limits.memory: "4GB" is not a size; write a positive whole number of KiB, MiB, GiB or TiB (e.g. 4GiB, 512MiB), of bytes, or unlimited`},
		{"zero size", "limits: {file_size: 0}\n", `limits.file_size: "0" is not a size`},
		{"negative processes", "limits: {processes: -1}\n", `limits.processes: "-1" is not a positive number`},
		{"nice range", "limits: {nice: 20}\n", `limits.nice: "20" is not a whole number from 0 (unchanged priority) to 19 (lowest)`},
		{"typo", "limits: {proceses: 5}\n", "did you mean `processes`?"},
		{"agent limits", agent + "    limits: {memory: lots}\n", `agent "acp.x.y": limits.memory: "lots" is not a size`},
		{"port range", agent + "    network: {allow_tcp_ports: [0]}\n", "network.allow_tcp_ports: 0 is not a TCP port (1 to 65535)"},
		{"no ports", agent + "    network: {}\n", "network: list the TCP ports the agent may connect to in allow_tcp_ports"},
		{"network without confinement", "confinement: off\n" + agent + "    network: {allow_tcp_ports: [443]}\n", "network needs confinement, which is off"},
		{"deepchat", "agents:\n  - id: deepchat.x.y\n    type: deepchat\n    limits: {processes: 5}\n", "limits and network apply to acp agents only"},
	}
	for _, c := range cases {
		_, err := loadValid(t, c.yaml)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want it to say %q", c.name, err, c.says)
		}
	}
}
