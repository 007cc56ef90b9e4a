package confine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Network is an egress policy: which TCP ports a confined command may connect to.
// Landlock (ABI 4 and newer) restricts connect(2) on TCP sockets by port only: it
// cannot tell hosts apart, so a listed port is open on every host, loopback included,
// and it does not restrict UDP, so DNS (and any UDP traffic) stays open.
type Network struct {
	// AllowTCPPorts are the TCP ports the command may connect to, on any host; every
	// other TCP connection is refused (EACCES), loopback services included. Binding
	// and listening are not restricted.
	AllowTCPPorts []uint16
}

// netLandlockABI is the first Landlock ABI that restricts TCP connections.
const netLandlockABI = 4

// RestrictsNetwork reports whether Landlock can enforce a Network policy here.
func (s Support) RestrictsNetwork() bool { return s.LandlockABI >= netLandlockABI }

// String describes the policy for logs and AgentInfo.
func (n Network) String() string {
	return "network: TCP connections only to " + n.ports() + " (on any host; UDP, and so DNS, not restricted)"
}

// ports lists the allowed ports in order: "port 443, 8080", "no port".
func (n Network) ports() string {
	if len(n.AllowTCPPorts) == 0 {
		return "no port"
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(n.AllowTCPPorts)))
	list := make([]string, len(sorted))
	for i, p := range sorted {
		list[i] = strconv.Itoa(int(p))
	}
	return "port " + strings.Join(list, ", ")
}

// networkMissing says what of p's network policy this machine cannot enforce.
func (p Policy) networkMissing(s Support) []string {
	if p.Network == nil || s.RestrictsNetwork() {
		return nil
	}
	return []string{fmt.Sprintf("network policy: Landlock ABI %d, need %d (Linux 6.7 or newer): the command can connect to every TCP port, not only %s",
		s.LandlockABI, netLandlockABI, p.Network.ports())}
}
