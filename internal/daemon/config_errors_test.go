package daemon

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goWords are what a config error must never show: Go type names, yaml.v3's own words
// and tags.
var goWords = regexp.MustCompile(`time\.Duration|\[\]string|map\[|daemon\.|presenters\.|int64|!!|unmarshal|struct`)

// Each error names the key and its line and says what to write instead, in YAML terms.
func TestConfigErrorsHelp(t *testing.T) {
	cases := []struct {
		name, yaml string
		says       []string
	}{
		{"top-level typo", "listen: 127.0.0.1:1\nworkspace_root: [/tmp]\n",
			[]string{"unknown key `workspace_root` at line 2; did you mean `workspace_roots`?"}},
		{"dash for underscore", "data-dir: /tmp\n", []string{"did you mean `data_dir`?"}},
		{"agent entry typo", "agents:\n  - id: acp.x.y\n    type: acp\n    comand: x\n",
			[]string{"unknown key `comand` at line 4 in agents[0]; did you mean `command`?"}},
		{"nested typo", "tls: {cert_file: c, keyfile: k}\n", []string{"unknown key `keyfile` at line 1 in tls; did you mean `key_file`?"}},
		{"nothing near", "colour: blue\n", []string{"unknown key `colour` at line 1; the keys there are: listen, data_dir,"}},
		{"duration without unit", "shutdown_timeout: 10\n", []string{"key `shutdown_timeout` at line 1: 10 has no unit; write 10s"}},
		{"zero without unit", "shutdown_timeout: 0\n", []string{"0 has no unit; write 0s"}},
		{"agent duration without unit", "agents:\n  - id: acp.x.y\n    permission_timeout: 300\n",
			[]string{"key `agents[0].permission_timeout` at line 3: 300 has no unit; write 300s"}},
		{"not a duration", "shutdown_timeout: soon\n", []string{`key ` + "`shutdown_timeout`" + ` at line 1: "soon" is not a duration; write it like 30s`}},
		{"string for a list", "workspace_roots: /tmp\n", []string{"key `workspace_roots` at line 1: expected a list of strings, not \"/tmp\""}},
		{"list for a string", "listen: [a, b]\n", []string{"key `listen` at line 1: expected a single value, not a list"}},
		{"word for a number", "event_buffer: lots\n", []string{"key `event_buffer` at line 1: expected a whole number, not \"lots\""}},
		{"list for env", "agents:\n  - id: acp.x.y\n    env: [A=1]\n", []string{"key `agents[0].env` at line 3: expected a mapping of names to strings, not a list"}},
		{"mapping for agents", "agents: {id: x}\n", []string{"key `agents` at line 1: expected a list of entries, each a mapping of settings (id: ..., type: ..., ...), not a mapping"}},
		{"scalar for tls", "tls: yes\n", []string{"key `tls` at line 1: expected a mapping of settings (cert_file: ..., key_file: ..., ...), not \"yes\""}},
		{"a list for a file", "- a\n", []string{"the file must hold a mapping of settings", "not a list (line 1)"}},
		{"not YAML", "listen: [\n", []string{"is not valid YAML"}},
		{"several at once", "listn: x\nshutdown_timeout: 5\n", []string{"has 2 problems:\n  unknown key `listn` at line 1; did you mean `listen`?\n  key `shutdown_timeout` at line 2"}},
	}
	for _, c := range cases {
		path := writeFile(t, c.yaml)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, want := range c.says {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q\nwant it to say %q", c.name, err, want)
			}
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %q does not name the file", c.name, err)
		}
		if w := goWords.FindString(err.Error()); w != "" {
			t.Errorf("%s: %q shows %q", c.name, err, w)
		}
	}
}

// What the checks admit still loads: aliases, merge keys, nulls, numbers as strings.
func TestConfigChecksAdmitValidYAML(t *testing.T) {
	cfg, err := Load(writeFile(t, `
timeouts: &t {permission_timeout: 2m}
listen: 127.0.0.1:7000
token: 12345
tls:
workspace_roots: [/tmp]
agents:
  - <<: *t
    id: acp.x.y
    type: acp
    command: x
    env: {A: 1}
`))
	// timeouts is not a key of agenticd's: the anchor must live under a known one.
	if err == nil || !strings.Contains(err.Error(), "unknown key `timeouts`") {
		t.Fatalf("an unknown key holding an anchor: %v", err)
	}
	cfg, err = Load(writeFile(t, `
listen: 127.0.0.1:7000
token: 12345
tls:
workspace_roots: [/tmp]
agents:
  - &base {id: acp.x.y, type: acp, command: x, permission_timeout: 2m, env: {A: 1}}
  - <<: *base
    id: acp.x.z
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Token != "12345" || len(cfg.Agents) != 2 || cfg.Agents[1].ID != "acp.x.z" || cfg.Agents[1].Command != "x" ||
		cfg.Agents[1].PermissionTimeout.Minutes() != 2 || cfg.Agents[0].Env["A"] != "1" {
		t.Errorf("config = %+v", cfg)
	}
}

// Validate's errors about an agent entry name its line in the file.
func TestValidateNamesTheAgentsLine(t *testing.T) {
	path := writeFile(t, "workspace_roots: [/tmp]\nagents:\n  - id: deepchat.a\n    type: deepchat\n  - id: acp.b\n    type: acp\n")
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cfg.WithDefaults(); err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "agents[1] (line 5 of "+path+"): ") || !strings.Contains(err.Error(), "command is required") {
		t.Errorf("Validate: %v", err)
	}
}

func TestDefaultWorkspaceRootsAddTheStartDirectoryOutsideHome(t *testing.T) {
	home := t.TempDir()
	elsewhere := t.TempDir()
	for _, tc := range []struct {
		cwd  string
		want []string
	}{
		{elsewhere, []string{home, elsewhere}},
		{home, []string{home}},
		{"/", []string{home}},
	} {
		t.Chdir(tc.cwd)
		if got := defaultWorkspaceRoots(home); !slices.Equal(got, tc.want) {
			t.Errorf("started in %s: roots %v, want %v", tc.cwd, got, tc.want)
		}
	}
	sub := filepath.Join(home, "src", "project")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	if got := defaultWorkspaceRoots(home); !slices.Equal(got, []string{home}) {
		t.Errorf("started below home: roots %v, want only home", got)
	}
}
