package worker

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard.dev/libs/sharedtest"
)

// parse registers the flags on a fresh set, parses args and validates.
func parse(args ...string) (*Config, error) {
	c := new(Config)
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

func TestValidateErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lonely := filepath.Join(dir, "lonely.bin")
	if err := os.WriteFile(lonely, make([]byte, 28), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-executor", "vllm"}, `-executor="vllm": want llama or sim`},
		{[]string{"-model", "/nonexistent/m.bin"}, `-model="/nonexistent/m.bin": no such file`},
		{[]string{"-model", dir}, "not a regular file"},
		{[]string{"-model", lonely}, `-model="` + lonely + `": `},
		{[]string{"-tokenizer", "t.bin"}, `-tokenizer="t.bin": needs -model`},
		{[]string{"-block-size", "0"}, "-block-size=0: must be at least 1"},
		{[]string{"-block-size", "4611686018427387904"}, "-block-size=4611686018427387904: at most 1024"},
		{[]string{"-num-blocks", "100000000"}, "-num-blocks=100000000: at most"},
		{[]string{"-num-blocks", "-3"}, "-num-blocks=-3: must be at least 0"},
		{[]string{"-num-blocks", "1"}, "-num-blocks=1: need at least 2 blocks"},
		{[]string{"-prefill-order", "lifo"}, `-prefill-order="lifo": want fcfs or shortest`},
		{[]string{"-max-running", "-1"}, "-max-running=-1"},
		{[]string{"-sim-profile", "p.json"}, `-sim-profile="p.json": only used with -executor=sim`},
		{[]string{"-sim-kv-bytes-per-token", "4"}, `-sim-kv-bytes-per-token=4: only used with -executor=sim`},
		{[]string{"-executor", "sim", "-model", lonely}, "only used with -executor=llama"},
		{[]string{"-executor", "sim", "-sim-speedup", "-1"}, "-sim-speedup=-1: must be 0"},
		{[]string{"-executor", "sim", "-sim-speedup", "NaN"}, "-sim-speedup=NaN"},
		{[]string{"-executor", "sim", "-sim-vocab", "100"}, "-sim-vocab=100: must be at least 259"},
		{[]string{"-executor", "sim", "-sim-context", "1"}, "-sim-context=1"},
		{[]string{"-executor", "sim", "-sim-kv-bytes-per-token", "-1"}, "-sim-kv-bytes-per-token=-1"},
		{[]string{"-executor", "sim", "-sim-profile", "/nonexistent.json"}, `-sim-profile="/nonexistent.json": no such file`},
		{[]string{"-kv-host-blocks", "-1"}, "-kv-host-blocks=-1: want 0 to"},
		{[]string{"-kv-disk-blocks", "8"}, "-kv-disk-blocks=8: needs -kv-disk-dir"},
		{[]string{"-kv-disk-dir", dir}, `-kv-disk-dir="` + dir + `": needs -kv-disk-blocks`},
		{[]string{"-kv-disk-dir", dir, "-kv-disk-blocks", "8", "-kv-disk-write-mbps", "-5"}, "-kv-disk-write-mbps=-5"},
		{[]string{"-executor", "sim", "-kv-host-blocks", "8"}, "set -sim-kv-bytes-per-token"},
		{[]string{"-kv-s3-endpoint", "http://127.0.0.1:1"}, `-kv-s3-endpoint="http://127.0.0.1:1": needs -kv-s3-bucket`},
		{[]string{"-kv-s3-bucket", "b", "-kv-s3-blocks", "0"}, "-kv-s3-blocks=0: want 1 to"},
		{[]string{"-kv-s3-bucket", "b", "-kv-s3-write-mbps", "-1"}, "-kv-s3-write-mbps=-1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			_, err := parse(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Validate() = %v; want one line containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		wantName string
	}{
		{nil, TinyRandomName},
		{[]string{"-model-name", "tiny"}, "tiny"},
		{[]string{"-executor", "sim"}, "sim"},
		{[]string{"-executor", "sim", "-sim-speedup", "inf", "-model-name", "mock"}, "mock"},
	} {
		c, err := parse(tc.args...)
		if err != nil || c.ModelName != tc.wantName {
			t.Fatalf("%v: name %q, err %v; want %q", tc.args, c.ModelName, err, tc.wantName)
		}
	}
}

// The tokenizer defaults to tokenizer.bin beside the model, else
// tok<vocab>.bin (stories260K's tok512.bin).
func TestResolveTokenizer(t *testing.T) {
	t.Parallel()
	stories := findStories(t)
	c, err := parse("-model", filepath.Join(stories, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tokenizer != filepath.Join(stories, "tok512.bin") || c.ModelName != "stories260K" {
		t.Fatalf("tokenizer %q, name %q; want tok512.bin beside the model, stories260K", c.Tokenizer, c.ModelName)
	}

	dir := t.TempDir()
	model := filepath.Join(dir, "m.bin")
	link(t, filepath.Join(stories, "stories260K.bin"), model)
	if _, err := parse("-model", model); err == nil || !strings.Contains(err.Error(), "tok512.bin") {
		t.Fatalf("no tokenizer beside the model: err %v; want one naming both candidates", err)
	}
	link(t, filepath.Join(stories, "tok512.bin"), filepath.Join(dir, "tokenizer.bin"))
	if c, err := parse("-model", model); err != nil || c.Tokenizer != filepath.Join(dir, "tokenizer.bin") {
		t.Fatalf("tokenizer %q, err %v; want tokenizer.bin when it is the only one", c.Tokenizer, err)
	}
	// Both: the vocabulary's own file wins (tokenizer.bin is llama2.c's
	// 32000-token default, another model's beside a 512-token one).
	link(t, filepath.Join(stories, "tok512.bin"), filepath.Join(dir, "tok512.bin"))
	if c, err := parse("-model", model); err != nil || c.Tokenizer != filepath.Join(dir, "tok512.bin") {
		t.Fatalf("tokenizer %q, err %v; want tok512.bin first", c.Tokenizer, err)
	}
}

func link(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Symlink(from, to); err != nil {
		t.Fatal(err)
	}
}

func findStories(t *testing.T) string {
	t.Helper()
	return sharedtest.Path(t, sharedtest.Stories260K)
}
