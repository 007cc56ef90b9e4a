// Package layering holds the test that keeps agenticd's imports pointing down, as
// docs/ARCHITECTURE.md draws them: it loads the import graph with `go list` and fails,
// naming the rule, when a package imports what it must not.
package layering

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/agenticd/agenticd"

// rule forbids the packages it covers to depend on the packages it names. Deps are
// transitive unless direct is set: a layer must not reach a forbidden package through
// another one either.
type rule struct {
	name     string
	covers   func(pkg string) bool
	forbids  func(dep string) bool
	direct   bool
	allowing func(pkg, dep string) bool // exceptions, nil for none
}

// under reports whether pkg is the module's package dir or one below it.
func under(dirs ...string) func(string) bool {
	return func(pkg string) bool {
		return slices.ContainsFunc(dirs, func(dir string) bool {
			p := module + "/" + dir
			return pkg == p || strings.HasPrefix(pkg, p+"/")
		})
	}
}

// is reports whether pkg is exactly one of the module's packages.
func is(dirs ...string) func(string) bool {
	return func(pkg string) bool {
		return slices.ContainsFunc(dirs, func(dir string) bool { return pkg == module+"/"+dir })
	}
}

// external reports whether pkg is one of the modules or packages named (or below one).
func external(prefixes ...string) func(string) bool {
	return func(pkg string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") })
	}
}

// project reports whether pkg is one of the module's packages.
func project(pkg string) bool { return strings.HasPrefix(pkg, module+"/") }

func either(a, b func(string) bool) func(string) bool {
	return func(s string) bool { return a(s) || b(s) }
}

var (
	wire = either(under("gen"), external("google.golang.org/grpc"))
	orm  = external("gorm.io")
)

// rules are the layering of docs/ARCHITECTURE.md.
var rules = []rule{
	{name: "nothing below service/ imports gen/ or grpc",
		covers: under("events", "store", "presenters", "sandbox"), forbids: wire},
	{name: "events/ knows no wire type",
		covers: under("events"), forbids: either(wire, external("google.golang.org/protobuf"))},
	{name: "store/ imports neither service/ nor gen/",
		covers: under("store"), forbids: under("service", "gen")},
	{name: "presenters import neither gen/ nor service/",
		covers: under("presenters"), forbids: under("gen", "service")},
	{name: "presenters are free of GORM (only store/ speaks it)",
		covers: under("presenters"), forbids: orm, direct: true},
	{name: "presenters do not import each other",
		covers: under("presenters/acp", "presenters/deepchat"), forbids: under("presenters/acp", "presenters/deepchat"),
		allowing: func(pkg, dep string) bool { return strings.HasPrefix(dep, pkg) }},
	{name: "sandbox/ imports nothing of the project",
		covers: under("sandbox"), forbids: project,
		allowing: func(_, dep string) bool { return under("sandbox")(dep) }},
	{name: "the vocabulary in presenters/ imports no storage",
		covers: is("presenters"), forbids: either(under("store"), orm)},
	{name: "webhooks/ is an event observer beside metrics: no wire, no storage, no service",
		covers: under("webhooks"), forbids: either(either(wire, external("google.golang.org/protobuf")), either(under("store", "service", "events"), orm))},
	{name: "service/wire, the wire encoding, imports neither store/ nor the rest of service/",
		covers: under("service/wire"), forbids: either(under("store", "service"), orm),
		allowing: func(_, dep string) bool { return under("service/wire")(dep) }},
	{name: "service/replicas, the routing between replicas, imports no more of service/ than service/wire",
		covers: under("service/replicas"), forbids: under("service"),
		allowing: func(_, dep string) bool { return under("service/replicas", "service/wire")(dep) }},
}

// pkg is what `go list -json` says of a package, as far as the rules need.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// violations lists each import that breaks a rule, as "rule: pkg imports dep".
func violations(pkgs []pkg, rules []rule) []string {
	var out []string
	for _, p := range pkgs {
		for _, r := range rules {
			if !r.covers(p.ImportPath) {
				continue
			}
			deps := p.Deps
			if r.direct {
				deps = p.Imports
			}
			for _, d := range deps {
				if d != p.ImportPath && r.forbids(d) && (r.allowing == nil || !r.allowing(p.ImportPath, d)) {
					out = append(out, fmt.Sprintf("%s: %s imports %s", r.name, p.ImportPath, d))
				}
			}
		}
	}
	return out
}

func TestImportsPointDown(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", module+"/...")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("go list: %v\n%s", err, exit.Stderr)
	} else if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: the graph was not loaded", len(pkgs))
	}
	for _, v := range violations(pkgs, rules) {
		t.Error(v)
	}
}

// Each rule catches the import it forbids: a graph that breaks only it fails only it.
func TestRulesCatchBreaks(t *testing.T) {
	m := func(dir string) string { return module + "/" + dir }
	for _, c := range []struct {
		rule string
		pkg  pkg
	}{
		{"nothing below service/ imports gen/ or grpc", pkg{ImportPath: m("sandbox/confine"), Deps: []string{"google.golang.org/grpc/status"}}},
		{"events/ knows no wire type", pkg{ImportPath: m("events"), Deps: []string{"google.golang.org/protobuf/proto"}}},
		{"store/ imports neither service/ nor gen/", pkg{ImportPath: m("store"), Deps: []string{m("service")}}},
		{"presenters import neither gen/ nor service/", pkg{ImportPath: m("presenters/deepchat"), Deps: []string{m("service")}}},
		{"presenters are free of GORM (only store/ speaks it)", pkg{ImportPath: m("presenters/acp"), Imports: []string{"gorm.io/gorm"}, Deps: []string{"gorm.io/gorm"}}},
		{"presenters do not import each other", pkg{ImportPath: m("presenters/acp"), Deps: []string{m("presenters/deepchat")}}},
		{"sandbox/ imports nothing of the project", pkg{ImportPath: m("sandbox"), Deps: []string{m("presenters/textutil")}}},
		{"the vocabulary in presenters/ imports no storage", pkg{ImportPath: m("presenters"), Deps: []string{m("store")}}},
		{"webhooks/ is an event observer beside metrics: no wire, no storage, no service", pkg{ImportPath: m("webhooks"), Deps: []string{m("store")}}},
		{"service/wire, the wire encoding, imports neither store/ nor the rest of service/", pkg{ImportPath: m("service/wire"), Deps: []string{m("service")}}},
		{"service/wire, the wire encoding, imports neither store/ nor the rest of service/", pkg{ImportPath: m("service/wire"), Deps: []string{m("store")}}},
		{"service/replicas, the routing between replicas, imports no more of service/ than service/wire", pkg{ImportPath: m("service/replicas"), Deps: []string{m("service")}}},
	} {
		got := violations([]pkg{c.pkg}, rules)
		if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, c.rule+":") }) {
			t.Errorf("%q did not catch %s importing %v (violations: %v)", c.rule, c.pkg.ImportPath, c.pkg.Deps, got)
		}
	}
	// What the rules allow: a presenter importing its own subpackage, sandbox its own, the
	// replicas' routing the wire encoding, the store and grpc.
	allowed := []pkg{
		{ImportPath: m("presenters/acp"), Deps: []string{m("presenters"), m("store"), m("sandbox")}},
		{ImportPath: m("sandbox"), Deps: []string{m("sandbox/confine")}},
		{ImportPath: m("service"), Deps: []string{m("gen/go/agentic/v1"), "google.golang.org/grpc"}},
		{ImportPath: m("service/wire"), Deps: []string{m("gen/go/agentic/v1"), m("presenters"), "google.golang.org/grpc"}},
		{ImportPath: m("service/replicas"), Deps: []string{m("service/wire"), m("store"), m("presenters"), "google.golang.org/grpc"}},
	}
	if got := violations(allowed, rules); len(got) > 0 {
		t.Errorf("allowed imports refused: %v", got)
	}
}
