package version

import (
	"runtime/debug"
	"testing"
)

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"released", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}}, "v0.3.0 (go1.26.8)"},
		{"checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3dfc938a1b2c3d4e5f"}, {Key: "vcs.time", Value: "2026-11-23T19:28:08Z"}, {Key: "vcs.modified", Value: "true"},
		}}, "devel 3dfc938a1b2c+dirty 2026-11-23T19:28:08Z (go1.26.8)"},
		{"no vcs", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "devel (go1.26.8)"},
	} {
		if got := describe(&tc.info); got != tc.want {
			t.Errorf("%s: describe = %q, want %q", tc.name, got, tc.want)
		}
	}
}
