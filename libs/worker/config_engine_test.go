package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard.dev/libs/engine/gguf"
)

// engineFixture is a converted stories260K GGUF beside its tokenizer, a
// llama2.c checkpoint that is not a GGUF, and a stand-in executable.
type engineFixture struct {
	dir, gguf, ckpt, bin string
}

func newEngineFixture(t *testing.T) engineFixture {
	t.Helper()
	stories := findStories(t)
	dir := t.TempDir()
	f := engineFixture{dir: dir, gguf: filepath.Join(dir, "stories260K.gguf"), ckpt: filepath.Join(stories, "stories260K.bin"), bin: filepath.Join(dir, "llama-server")}
	if err := gguf.ConvertFiles(f.gguf, f.ckpt, filepath.Join(stories, "tok512.bin"), "stories260K"); err != nil {
		t.Fatal(err)
	}
	link(t, filepath.Join(stories, "tok512.bin"), filepath.Join(dir, "tok512.bin"))
	if err := os.WriteFile(f.bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestValidateEngineErrors(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	url := "http://127.0.0.1:8080"
	tok := filepath.Join(f.dir, "tok512.bin")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-engine", "tgi"}, `-engine="tgi": want builtin, llamacpp, vllm or sglang`},
		{[]string{"-engine-url", url}, `-engine-url="` + url + `": only with -engine=llamacpp, vllm or sglang`},
		{[]string{"-engine", "llamacpp"}, "set -engine-url (a running llama-server) or -llama-server-bin"},
		{[]string{"-engine", "llamacpp", "-engine-url", "ftp://x"}, `-engine-url="ftp://x": want http://host:port`},
		{[]string{"-engine", "llamacpp", "-engine-url", url}, "-tokenizer: required with -engine=llamacpp"},
		{[]string{"-engine", "llamacpp", "-engine-url", url, "-tokenizer", tok, "-engine-kv-events", "tcp://127.0.0.1:5557"}, "llama.cpp publishes no KV events"},
		{[]string{"-engine", "llamacpp", "-engine-url", url, "-tokenizer", tok, "-kv-host-blocks", "8"}, "KV tiers below the arena need -engine=builtin"},
		{[]string{"-engine", "llamacpp", "-engine-url", url, "-model", f.gguf}, "with -engine-url the engine has its model"},
		{[]string{"-engine", "llamacpp", "-engine-cmd", f.bin}, `-engine-cmd="` + f.bin + `": needs -engine-url`},
		{[]string{"-engine", "llamacpp", "-llama-server-bin", f.bin}, "needs -model, the GGUF file it serves"},
		{[]string{"-engine", "llamacpp", "-llama-server-bin", filepath.Join(f.dir, "nope")}, `-llama-server-bin="` + filepath.Join(f.dir, "nope") + `"`},
		{[]string{"-engine", "llamacpp", "-llama-server-bin", tok, "-model", f.gguf}, "not an executable file"},
		{[]string{"-engine", "llamacpp", "-llama-server-bin", f.bin, "-model", f.ckpt}, `-model="` + f.ckpt + `": not a GGUF model llama.cpp can load: gguf: malformed file: at offset 4: magic`},
		{[]string{"-engine", "llamacpp", "-llama-server-bin", f.bin, "-model", f.gguf, "-engine-context", "4096"}, "-engine-context=4096: want 0 (the model's) to 512"},
		{[]string{"-engine", "llamacpp", "-llama-server-bin", f.bin, "-model", f.gguf, "-engine-slots", "0"}, "-engine-slots=0: want 1 to 256"},
		{[]string{"-engine", "llamacpp", "-llama-server-bin", f.bin, "-model", f.gguf, "-block-size", "300"}, "under two blocks of -block-size=300"},
		{[]string{"-engine", "vllm", "-engine-url", url, "-tokenizer", tok}, "-engine=vllm: needs -model-name"},
		{[]string{"-engine", "sglang", "-engine-url", url, "-model-name", "m", "-engine-kv-events", "localhost:5557"}, `-engine-kv-events="localhost:5557": want a ZeroMQ endpoint`},
		{[]string{"-engine", "vllm", "-engine-url", url, "-model-name", "m", "-llama-server-bin", f.bin}, "only with -engine=llamacpp"},
	} {
		_, err := parse(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v; want it to contain %q", tc.args, err, tc.want)
		}
	}
}

func TestValidateEngineDefaults(t *testing.T) {
	t.Parallel()
	f := newEngineFixture(t)
	c, err := parse("-engine", "llamacpp", "-llama-server-bin", f.bin, "-model", f.gguf)
	if err != nil {
		t.Fatal(err)
	}
	e := c.EngineCfg
	if c.ModelName != "stories260K" || c.Tokenizer != f.gguf || e.Context != 512 || e.Slots != 4 {
		t.Fatalf("model name %q, tokenizer %q, context %d, slots %d; want the GGUF's name and vocabulary, its 512 tokens, 4 slots",
			c.ModelName, c.Tokenizer, e.Context, e.Slots)
	}
	if _, err := parse("-engine", "vllm", "-engine-url", "http://h:8000", "-model-name", "m", "-tokenizer", filepath.Join(f.dir, "tok512.bin"),
		"-engine-kv-events", "tcp://h:5557", "-engine-kv-replay", "tcp://h:5558"); err != nil {
		t.Fatal(err)
	}
}
