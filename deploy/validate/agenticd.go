package validate

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"
)

// agenticdConfig is what the manifests depend on in an agenticd config file. agenticd's
// own loader checks the file whole (internal/daemon/deploy_config_test.go).
type agenticdConfig struct {
	path            string
	listenPort      int32
	shutdownTimeout time.Duration
	dataDir         string
	workspaceRoots  []string
	hasReplica      bool
}

// agenticd's default when the file sets no shutdown_timeout (daemon.DefaultShutdownTimeout).
const defaultShutdownTimeout = 10 * time.Second

func parseAgenticdConfig(rel string, data []byte) (*agenticdConfig, error) {
	var raw struct {
		Listen          string   `json:"listen"`
		ShutdownTimeout string   `json:"shutdown_timeout"`
		DataDir         string   `json:"data_dir"`
		Database        string   `json:"database"`
		WorkspaceRoots  []string `json:"workspace_roots"`
		Replica         any      `json:"replica"`
	}
	// Not strict: the other keys are agenticd's to check.
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	c := &agenticdConfig{path: rel, dataDir: raw.DataDir, workspaceRoots: raw.WorkspaceRoots, hasReplica: raw.Replica != nil, shutdownTimeout: defaultShutdownTimeout}
	_, port, err := net.SplitHostPort(raw.Listen)
	if err != nil {
		return nil, fmt.Errorf("%s: listen %q is not host:port: a container's config must listen beyond loopback on a fixed port", rel, raw.Listen)
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil || p <= 0 {
		return nil, fmt.Errorf("%s: listen %q has no fixed port", rel, raw.Listen)
	}
	c.listenPort = int32(p)
	if raw.ShutdownTimeout != "" {
		if c.shutdownTimeout, err = time.ParseDuration(raw.ShutdownTimeout); err != nil {
			return nil, fmt.Errorf("%s: shutdown_timeout: %w", rel, err)
		}
	}
	if raw.Database != "" {
		// The file goes into a ConfigMap, which anyone who may read the namespace reads.
		if u, err := url.Parse(raw.Database); err != nil {
			return nil, fmt.Errorf("%s: database is not a URL", rel)
		} else if _, has := u.User.Password(); has {
			return nil, fmt.Errorf("%s: database holds a password: take it out of the file and give the URL in AGENTICD_DATABASE from a Secret", rel)
		}
	}
	if c.dataDir == "" {
		return nil, fmt.Errorf("%s: no data_dir: a container's config must put it on a volume", rel)
	}
	if len(c.workspaceRoots) == 0 {
		return nil, fmt.Errorf("%s: no workspace_roots: a container's config must put them on a volume", rel)
	}
	return c, nil
}
