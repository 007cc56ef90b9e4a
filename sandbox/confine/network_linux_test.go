package confine_test

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/agenticd/agenticd/internal/testlisten"
	"github.com/agenticd/agenticd/internal/unprivileged"
	"github.com/agenticd/agenticd/sandbox/confine"
)

// listenLoopback accepts (and closes) connections on a free port of 127.0.0.1 until the
// test ends, and returns the port.
func listenLoopback(t *testing.T) uint16 {
	t.Helper()
	return uint16(testlisten.Serve(t, "tcp4", "127.0.0.1:0", nil).(*net.TCPAddr).Port)
}

// With a network policy a confined command connects only to the listed TCP port, on
// loopback too; without one it connects to both.
func TestNetworkPolicyAllowsOnlyListedPorts(t *testing.T) {
	if unprivileged.Reexec(t) {
		return
	}
	requireSupport(t)
	if !confine.Probe().RestrictsNetwork() {
		t.Skipf("Landlock ABI %d cannot restrict TCP", confine.Probe().LandlockABI)
	}
	allowed, other := listenLoopback(t), listenLoopback(t)
	tr := newTree(t)
	connect := func(policy confine.Policy, port uint16) (bool, string) {
		// bash opens /dev/tcp/HOST/PORT with connect(2).
		r := runBash(t, &policy, tr.ws, fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d`, port))
		return r.code == 0, r.stderr
	}
	open := tr.policy()
	for _, port := range []uint16{allowed, other} {
		if ok, stderr := connect(open, port); !ok {
			t.Fatalf("without a network policy, port %d: %s", port, stderr)
		}
	}
	restricted := tr.policy()
	restricted.Network = &confine.Network{AllowTCPPorts: []uint16{allowed}}
	if ok, stderr := connect(restricted, allowed); !ok {
		t.Errorf("listed port %d refused: %s", allowed, stderr)
	}
	if ok, stderr := connect(restricted, other); ok || !strings.Contains(stderr, "Permission denied") {
		t.Errorf("unlisted port %d: connected %v, %q; want Permission denied", other, ok, stderr)
	}
}

// The policy's description names its ports once each, in order, and what Landlock
// cannot restrict.
func TestNetworkPolicyString(t *testing.T) {
	n := confine.Network{AllowTCPPorts: []uint16{8443, 443, 443}}
	if got := n.String(); !strings.Contains(got, "port 443, 8443") || !strings.Contains(got, "any host") || !strings.Contains(got, "UDP") {
		t.Errorf("String() = %q", got)
	}
}

// runBash is run with bash, which has /dev/tcp.
func runBash(t *testing.T, policy *confine.Policy, dir, script string) result {
	t.Helper()
	return run(t, policy, dir, "exec /bin/bash -c '"+strings.ReplaceAll(script, "'", `'\''`)+"'")
}
