// Package sharedtest resolves the project's reference data for tests: the
// tiny real model and the Mooncake traces that live in shared/, next to
// the checkout (../shared from the repository root), and are never copied
// into the repository.
//
// Every test that reads shared/ goes through Path, so that one rule decides
// what a missing file means: with SWITCHYARD_REQUIRE_SHARED=1 (set by `make
// test`, hence by CI) the test fails, because there a missing file is a
// broken set-up and a skip would hide the test it guards; otherwise, in a
// bare `go test` on a machine without shared/, it skips with the path it
// looked for.
package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Paths under shared/ that tests use.
const (
	// Stories260K is the directory of the llama2.c stories260K checkpoint
	// (stories260K.bin), its tokenizer (tok512.bin) and reference output.
	Stories260K = "models/stories260K"
	// ConversationTrace and SyntheticTrace are the Mooncake traces.
	ConversationTrace = "traces/conversation_trace.jsonl"
	SyntheticTrace    = "traces/synthetic_trace.jsonl"
)

// RequireEnv names the environment variable that turns a missing shared
// file from a skip into a failure.
const RequireEnv = "SWITCHYARD_REQUIRE_SHARED"

// lookup returns the path of shared/rel in the nearest ancestor of the
// working directory that has it, and whether one does.
func lookup(rel string) (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		p := filepath.Join(dir, "shared", filepath.FromSlash(rel))
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// Path returns the path of shared/rel, or ends the test: it fails when
// SWITCHYARD_REQUIRE_SHARED=1 and skips otherwise.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	if p, ok := lookup(rel); ok {
		return p
	}
	if Required() {
		tb.Fatalf("shared/%s not found in any ancestor of the working directory; %s=1 requires it (expected at ../shared/%s relative to the repository root)", rel, RequireEnv, rel)
		return ""
	}
	tb.Skipf("shared/%s not found in any ancestor of the working directory (expected at ../shared/%s relative to the repository root); set %s=1 to fail instead", rel, rel, RequireEnv)
	return ""
}

// Optional returns the path of shared/rel and true, for a test that uses
// the file when it is there and runs without it otherwise (a benchmark that
// prefers the real model to its random twin, a test that adds the real
// tokenizer to its cases). When the file is missing it returns false, or
// fails the test when SWITCHYARD_REQUIRE_SHARED=1: there the file's cases
// must run.
func Optional(tb testing.TB, rel string) (string, bool) {
	tb.Helper()
	if p, ok := lookup(rel); ok {
		return p, true
	}
	if Required() {
		tb.Fatalf("shared/%s not found in any ancestor of the working directory; %s=1 requires it (expected at ../shared/%s relative to the repository root)", rel, RequireEnv, rel)
	}
	return "", false
}

// Required reports whether a missing shared file fails the test.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// LlamaCppTestDataEnv names the directory of llama.cpp's own reference
// data (its ggml-vocab-* vocabularies with their tokenizer test vectors,
// models/templates/ and tests/test-chat-template.cpp), which
// `scripts/llamacpp.sh testdata` keeps in the tool cache and `make test`
// exports.
const LlamaCppTestDataEnv = "LLAMACPP_TESTDATA"

// LlamaCpp returns the path of rel inside the llama.cpp test data
// directory, or ends the test as Path does: it fails when
// SWITCHYARD_REQUIRE_SHARED=1 and skips otherwise.
func LlamaCpp(tb testing.TB, rel string) string {
	tb.Helper()
	dir := os.Getenv(LlamaCppTestDataEnv)
	p := filepath.Join(dir, rel)
	if dir != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if Required() {
		tb.Fatalf("llama.cpp test data %s not found (%s=%q); %s=1 requires it: run scripts/llamacpp.sh testdata", rel, LlamaCppTestDataEnv, dir, RequireEnv)
		return ""
	}
	tb.Skipf("llama.cpp test data %s not found (%s=%q; scripts/llamacpp.sh testdata makes it); set %s=1 to fail instead", rel, LlamaCppTestDataEnv, dir, RequireEnv)
	return ""
}
