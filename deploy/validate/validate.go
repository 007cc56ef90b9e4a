// Package validate checks what is under deploy/: every Kubernetes manifest decoded strictly
// into its typed k8s.io/api object (an unknown or misspelt field is an error, as the API
// server's strict field validation would make it), then checked for what running
// agenticd needs (probes, Secrets, selectors, volumes, ports, storage, grace periods); the
// Envoy config decoded strictly into Envoy's Bootstrap and checked likewise. It is a
// module of its own so that k8s.io/api and Envoy's API stay out of agenticd's module;
// `make deploy-check` (part of `make test`) runs its tests.
//
// The agenticd config files (deploy/agenticd*.yaml) are loaded with agenticd's own loader
// by internal/daemon/deploy_config_test.go; here they are read only for the settings the
// manifests depend on (listen port, shutdown_timeout, data_dir, workspace_roots).
package validate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Check validates every file under root/deploy (root is the repository's root) and
// returns each problem found, naming its file; none for a good tree. Every YAML file
// there must be a Kubernetes manifest (deploy/kubernetes/), an Envoy config
// (deploy/envoy/) or an agenticd config (deploy/agenticd*.yaml): a YAML file that is none
// of them is a problem too, so that nothing under deploy/ goes unchecked.
func Check(root string) []error {
	t := &tree{root: root, configs: map[string]*agenticdConfig{}, envoys: map[string]*envoyConfig{}, files: map[string]bool{}}
	var files []string
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "deploy/validate" { // this module: Go, and test copies of deploy/
				return filepath.SkipDir
			}
			return nil
		}
		if ext := path.Ext(rel); ext == ".yaml" || ext == ".yml" {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return []error{err}
	}
	sort.Strings(files)
	for _, rel := range files {
		t.files[rel] = true
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.problems = append(t.problems, err)
			continue
		}
		switch {
		case strings.HasPrefix(rel, "deploy/kubernetes/"):
			m, errs := parseManifest(rel, data)
			t.problems = append(t.problems, errs...)
			if m != nil {
				t.manifests = append(t.manifests, m)
			}
		case strings.HasPrefix(rel, "deploy/envoy/"):
			e, err := parseEnvoy(rel, data)
			if err != nil {
				t.problems = append(t.problems, err)
				continue
			}
			t.envoys[rel] = e
		case path.Dir(rel) == "deploy" && strings.HasPrefix(path.Base(rel), "agenticd"):
			c, err := parseAgenticdConfig(rel, data)
			if err != nil {
				t.problems = append(t.problems, err)
				continue
			}
			t.configs[rel] = c
		default:
			t.problems = append(t.problems, fmt.Errorf("%s: a YAML file the validator does not know: put manifests in deploy/kubernetes/, Envoy configs in deploy/envoy/, agenticd configs in deploy/agenticd*.yaml (or teach deploy/validate the new kind of file)", rel))
		}
	}
	if len(t.manifests) == 0 {
		t.problems = append(t.problems, errors.New("deploy/kubernetes/ holds no manifest: is root the repository's root?"))
	}
	for _, m := range t.manifests {
		t.checkManifest(m)
	}
	for _, rel := range sortedKeys(t.envoys) {
		t.checkEnvoy(t.envoys[rel])
	}
	return t.problems
}

// tree is everything read from deploy/, and the problems found so far.
type tree struct {
	root      string
	manifests []*manifest
	configs   map[string]*agenticdConfig // by repository-relative path
	envoys    map[string]*envoyConfig    // by repository-relative path
	files     map[string]bool            // every YAML file read, valid or not
	problems  []error
}

func (t *tree) addf(format string, args ...any) {
	t.problems = append(t.problems, fmt.Errorf(format, args...))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
