// Package doccheck holds the test that keeps the docs naming what exists: every file
// path and every Go identifier that README.md and docs/*.md name in backquotes must be
// found in the repository.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, two levels above this package.
const root = "../.."

// docs are the documents checked. docs/BENCHMARKS.md is left out: it records each
// measurement as it was made, in the names the code had then.
func docs(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		if filepath.Base(f) != "BENCHMARKS.md" {
			files = append(files, f)
		}
	}
	return files
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	// A Go name as docs write it: Name, pkg.Name, Type.Method, with an optional ().
	goName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z_][A-Za-z0-9_]*)?(\(\))?$`)
	// Top-level directories of the repository: a path starting with one is the repo's.
	fileExt = regexp.MustCompile(`\.(go|md|proto|ya?ml|sh|ts|json|html|css|py|service|conf|mod|sum)$`)
	// A bare file name of these kinds is the repository's; others (settings.json,
	// config.toml) are often an agent's.
	ownExt = regexp.MustCompile(`\.(go|md|proto|sh|service)$`)
)

// outsideWords are mixed-case names of the outside world the docs name: cookie
// attributes, units, ACP's JSON fields, google.rpc's and grpc-go's and GORM's names.
var outsideWords = map[string]bool{
	"HttpOnly": true, "SameSite": true, "KiB": true, "MiB": true, "GiB": true, "TiB": true,
	"promptCapabilities": true, "toolCallId": true, "sessionId": true, "agentInfo": true,
	"createWebSocketStream": true,
	"ErrorInfo":             true, "BadRequest": true, "GracefulStop": true, "WaitForHandlers": true,
	"AutoMigrate": true, "PrepareStmt": true,
}

// repository is what the docs may name: files (by path from the root and by base name)
// and Go identifiers (declared names, package names).
type repository struct {
	paths       map[string]bool // slash-separated, from the root; directories end in "/"
	bases       map[string]bool
	topDirs     map[string]bool
	names       map[string]bool // every declared identifier: funcs, methods, types, fields, consts, vars
	types       map[string]bool
	members     map[string]map[string]bool // a type's methods and fields
	packages    map[string]bool
	protoFields map[string]bool // proto field names as written (snake_case)
	protoJSON   map[string]bool // ...and in lowerCamelCase (JSON)
}

func load(t *testing.T) repository {
	t.Helper()
	r := repository{paths: map[string]bool{}, bases: map[string]bool{}, topDirs: map[string]bool{},
		names: map[string]bool{}, types: map[string]bool{}, members: map[string]map[string]bool{}, packages: map[string]bool{},
		protoFields: map[string]bool{}, protoJSON: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "dist":
				if rel != "web/dist" {
					return fs.SkipDir
				}
			}
			if rel != "." {
				r.paths[rel+"/"] = true
				if !strings.Contains(rel, "/") {
					r.topDirs[rel] = true
				}
			}
			return nil
		}
		r.paths[rel] = true
		r.bases[d.Name()] = true
		switch filepath.Ext(path) {
		case ".go":
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			r.packages[f.Name.Name] = true
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncDecl:
					r.names[n.Name.Name] = true
					if n.Recv != nil && len(n.Recv.List) == 1 {
						r.member(receiverType(n.Recv.List[0].Type), n.Name.Name)
					}
				case *ast.TypeSpec:
					r.names[n.Name.Name] = true
					r.types[n.Name.Name] = true
					var fields *ast.FieldList
					switch tt := n.Type.(type) {
					case *ast.StructType:
						fields = tt.Fields
					case *ast.InterfaceType:
						fields = tt.Methods
					}
					if fields != nil {
						for _, f := range fields.List {
							for _, id := range f.Names {
								r.member(n.Name.Name, id.Name)
							}
							if len(f.Names) == 0 {
								r.member(n.Name.Name, receiverType(f.Type)) // embedded
							}
						}
					}
				case *ast.ValueSpec:
					for _, id := range n.Names {
						r.names[id.Name] = true
					}
				case *ast.Field:
					for _, id := range n.Names {
						r.names[id.Name] = true
					}
				}
				return true
			})
		case ".proto":
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range regexp.MustCompile(`(?m)^\s*(?:repeated |optional )?[\w.]+ (\w+) = \d+`).FindAllStringSubmatch(string(b), -1) {
				r.protoFields[m[1]] = true
				r.protoJSON[lowerCamel(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r repository) member(typ, name string) {
	if r.members[typ] == nil {
		r.members[typ] = map[string]bool{}
	}
	r.members[typ][name] = true
}

// receiverType is the name of the type in a receiver or an embedded field: T, *T, T[X].
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func lowerCamel(snake string) string {
	parts := strings.Split(snake, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// problem says what is wrong with a code span, "" when nothing is (or it is neither a
// repository path nor a Go name).
func (r repository) problem(span string) string {
	if p, isPath := r.pathProblem(span); isPath {
		return p
	}
	return r.nameProblem(span)
}

// pathProblem checks a span that is a path in the repository: one that starts with a
// top-level directory, or a bare file name with a known extension.
// isPath says whether the span was taken for a path at all.
func (r repository) pathProblem(span string) (problem string, isPath bool) {
	p := strings.TrimPrefix(span, "./")
	if strings.ContainsAny(p, " <>*$~{}=:") || strings.HasPrefix(p, "/") {
		return "", fileExt.MatchString(p)
	}
	top, _, nested := strings.Cut(p, "/")
	switch {
	case nested && r.topDirs[top]:
		if r.paths[p] || r.paths[strings.TrimSuffix(p, "/")+"/"] {
			return "", true
		}
		return "no such file or directory in the repository", true
	case !nested && ownExt.MatchString(p) && !strings.HasPrefix(p, "."):
		if r.bases[p] || r.paths[p] {
			return "", true
		}
		return "no file of that name in the repository", true
	case nested && strings.HasSuffix(p, ".go"):
		// A path below a package, as in acp/lifecycle.go.
		for path := range r.paths {
			if strings.HasSuffix(path, "/"+p) {
				return "", true
			}
		}
		return "no file with that path in the repository", true
	}
	return "", fileExt.MatchString(p)
}

// nameProblem checks a span that looks like a Go name of this repository: Type.Member,
// pkg.Name, or one mixed-case identifier.
func (r repository) nameProblem(span string) string {
	m := goName.FindStringSubmatch(span)
	if m == nil {
		return ""
	}
	first, member := m[1], strings.TrimPrefix(m[2], ".")
	if member == "" {
		if !goLike(first) || r.protoJSON[first] || outsideWords[first] || r.names[first] {
			return ""
		}
		return "no Go identifier of that name is declared"
	}
	// Qualified: checked when the qualifier is one of our types or packages; one from
	// elsewhere (os.Unsetenv, runtime.GOMAXPROCS) and a dotted word (deepchat.default,
	// tls.cert_file) are not.
	ours := r.types[first] || (r.packages[first] && !isStdlibLike(first))
	switch {
	case !ours:
		return ""
	case r.types[first] && (goLike(member) || unicode.IsUpper(rune(member[0]))):
		if r.members[first][member] {
			return ""
		}
		return first + " has no method or field " + member
	case goLike(member) || unicode.IsUpper(rune(member[0])):
		if r.names[member] {
			return ""
		}
		return "no Go identifier " + member + " is declared"
	case r.types[first]:
		// Message.field, as the proto names it.
		if r.protoFields[member] || r.names[member] {
			return ""
		}
		return "no field " + member + " in the protos, nor a Go name"
	}
	return ""
}

// goLike reports whether s reads as a Go identifier rather than a word, a constant
// (ALL_CAPS), a config key (snake_case) or a command: it mixes cases and has no
// underscore.
func goLike(s string) bool {
	if strings.Contains(s, "_") {
		return false
	}
	var lower, upper bool
	for i, c := range s {
		switch {
		case unicode.IsUpper(c):
			if i > 0 {
				upper = true
			}
		case unicode.IsLower(c):
			lower = true
		}
	}
	return lower && upper
}

// isStdlibLike reports package names the project shares with the standard library or
// its dependencies, whose members docs also name (errors.Is).
func isStdlibLike(pkg string) bool {
	switch pkg {
	case "errors", "context", "time", "os", "io", "net", "http", "sync", "strings", "bytes", "json", "proto", "grpc", "slog", "testing":
		return true
	}
	return false
}

func TestDocsNameWhatExists(t *testing.T) {
	r := load(t)
	for _, doc := range docs(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for n, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
				continue
			}
			if inFence {
				continue
			}
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				if p := r.problem(m[1]); p != "" {
					rel, _ := filepath.Rel(root, doc)
					t.Errorf("%s:%d: `%s`: %s", rel, n+1, m[1], p)
				}
			}
		}
	}
}

// The checker catches a wrong path, a wrong member and a wrong name, and lets pass what
// exists and what is not the repository's.
func TestCheckerCatchesWhatIsMissing(t *testing.T) {
	r := load(t)
	for span, wantProblem := range map[string]bool{
		"service/nothing_here.go": true,
		"acp/lifecycle.go":        false,
		"acp/nowhere.go":          true,
		"docs/ARCHITECTURE.md":    false,
		"Subscription.Next":       true,
		"Subscription.NextBatch":  false,
		"Writer.SaveMessageWait":  true,
		"Writer.SaveUpdateWait":   false,
		"MarkInterrupted":         false,
		"markNothingAtAll":        true,
		"os.Unsetenv":             false,
		"max_procs":               false,
		"SESSION_BUSY":            false,
		"sessionId":               false,
		"/proc/self/environ":      false,
		"session/new":             false,
	} {
		if got := r.problem(span) != ""; got != wantProblem {
			t.Errorf("`%s`: problem %q, want a problem: %v", span, r.problem(span), wantProblem)
		}
	}
}
