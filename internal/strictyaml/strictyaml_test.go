package strictyaml

import "testing"

func TestNearestKey(t *testing.T) {
	known := []string{"listen", "data_dir", "workspace_roots", "log_level", "log_format"}
	for typo, want := range map[string]string{
		"workspace_root": "workspace_roots", "Listen": "listen", "datadir": "data_dir", "log-format": "log_format",
		"loglevel": "log_level", "agents": "", "x": "",
	} {
		if got := nearestKey(typo, known); got != want {
			t.Errorf("nearestKey(%q) = %q, want %q", typo, got, want)
		}
	}
}
