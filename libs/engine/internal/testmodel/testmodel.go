// Package testmodel finds the shared reference model files for tests.
//
// The files live outside the repository (../shared/models next to the
// checkout) and must never be copied in, so tests locate them by walking up
// from their package directory and skip when they are absent.
package testmodel

import (
	"os"
	"path/filepath"
	"testing"
)

// Stories260K is the directory of the stories260K checkpoint and tokenizer.
const Stories260K = "shared/models/stories260K"

// Find returns the path of rel (e.g. Stories260K) found in the nearest
// ancestor of the working directory that contains it, or "" if none does.
func Find(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Stories returns the stories260K directory or skips the test.
func Stories(tb testing.TB) string {
	tb.Helper()
	p := Find(Stories260K)
	if p == "" {
		tb.Skipf("stories260K not found: looked for %s in every ancestor of the working directory (expected at ../shared/models/stories260K relative to the repository root)", Stories260K)
	}
	return p
}
