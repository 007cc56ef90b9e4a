// Package version tells which build of agenticd's commands is running, from what the Go
// toolchain records in the binary: the module version when installed with `go install
// ...@vX`, else the VCS revision and time when built from a checkout.
package version

import (
	"fmt"
	"runtime/debug"
	"sync"
)

// String is one line such as "agenticd v0.3.0 (go1.26.8)" or
// "agenticctl devel 3dfc938a1b2c+dirty 2026-11-23T19:28:08Z (go1.26.8)".
func String(command string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return command + " unknown version (built without module support)"
	}
	return command + " " + describe(info)
}

// Number is the version alone, as agenticd names itself to the agents it starts: the
// module version, else "devel" (a build from a checkout). Read once: every session's
// description carries it, and reading the build info parses it anew each time.
var Number = sync.OnceValue(func() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		if v, ok := released(info); ok {
			return v
		}
	}
	return "devel"
})

// released is the module version of a build installed as a release.
func released(info *debug.BuildInfo) (string, bool) {
	v := info.Main.Version
	return v, v != "" && v != "(devel)"
}

func describe(info *debug.BuildInfo) string {
	if v, ok := released(info); ok {
		return fmt.Sprintf("%s (%s)", v, info.GoVersion)
	}
	var revision, when, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if revision == "" {
		return fmt.Sprintf("devel (%s)", info.GoVersion)
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	return fmt.Sprintf("devel %s%s %s (%s)", revision, dirty, when, info.GoVersion)
}
