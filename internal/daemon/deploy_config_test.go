package daemon

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Every agenticd config under deploy/ (deploy/**/agenticd*.yaml: the image's, the
// Kubernetes ones) loads with agenticd's own loader and, given what its manifest puts in
// the environment (AGENTICD_TOKEN; AGENTICD_DATABASE for a config with replica settings),
// is valid. deploy/validate checks the manifests around them.
func TestDeployConfigsLoad(t *testing.T) {
	deploy := filepath.Join("..", "..", "deploy")
	var files []string
	err := filepath.WalkDir(deploy, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "validate" {
			return filepath.SkipDir
		}
		if name := d.Name(); !d.IsDir() && strings.HasPrefix(name, "agenticd") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %v under deploy/: expected agenticd.yaml and agenticd-replicas.yaml at least", files)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			cfg, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Token != "" {
				t.Error("the file holds a token: it comes from AGENTICD_TOKEN (a Secret)")
			}
			if cfg.Database != "" {
				t.Error("the file holds a database URL, password and all: it comes from AGENTICD_DATABASE (a Secret)")
			}
			replicated := cfg.Replica != (ReplicaConfig{})
			// What the manifests set in the environment (cmd/agenticd applies it).
			cfg.Token = "from-AGENTICD_TOKEN-0123456789abcdef"
			if replicated {
				cfg.Database = "postgres://agenticd:secret@agenticd-postgres:5432/agenticd?sslmode=disable"
				cfg.Replica.Advertise = "10.0.0.7:50051"
			}
			if cfg, err = cfg.WithDefaults(); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Error(err)
			}
			cfg.Token = ""
			if err := cfg.Validate(); err == nil && !isLoopback(hostOf(cfg.Listen)) {
				t.Errorf("it listens on %s, beyond loopback: without a token it must be refused", cfg.Listen)
			}
		})
	}
}
