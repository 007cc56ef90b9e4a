package validate

import (
	"path/filepath"
	"testing"
)

// repoRoot is the repository's root, from this package's directory (deploy/validate).
var repoRoot = filepath.Join("..", "..")

// What is under deploy/ is valid: every manifest, the Envoy config, and how they fit.
func TestDeploy(t *testing.T) {
	for _, err := range Check(repoRoot) {
		t.Error(err)
	}
}
