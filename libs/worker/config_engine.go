package worker

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"switchyard.dev/libs/worker/engines/llamacpp"
)

// Engines selectable with -engine.
const (
	EngineBuiltin  = "builtin"
	EngineLlamaCpp = "llamacpp"
	EngineVLLM     = "vllm"
	EngineSGLang   = "sglang"
)

// KVEventsNone (-engine-kv-events=none) publishes no KV events: the
// router approximates the worker's cache from its routing decisions.
const KVEventsNone = "none"

// EngineConfig selects and reaches the engine a worker serves with.
type EngineConfig struct {
	Engine string
	URL    string
	// KVEvents: "" (llamacpp: synthesized from its slots; vllm/sglang:
	// none), KVEventsNone, or the ZeroMQ endpoint of a vLLM/SGLang
	// engine's KV event publisher; KVReplay its replay endpoint.
	KVEvents string
	KVReplay string
	// Cmd is a command line (split on spaces, no shell) the worker starts
	// and stops with itself; the engine answers at URL.
	Cmd string
	// LlamaServerBin starts llama-server on a free loopback port, serving
	// -model (a GGUF file) with Slots slots of Context tokens each.
	LlamaServerBin string
	Slots          int
	Context        int
	// ExtraArgs are more llama-server arguments (split on spaces).
	ExtraArgs    string
	StartTimeout time.Duration
	LogFile      string

	gguf llamacpp.GGUF // -model's metadata, read by Validate
}

func (c *Config) registerEngine(fs *flag.FlagSet) {
	e := &c.EngineCfg
	fs.StringVar(&e.Engine, "engine", EngineBuiltin, "engine: builtin (libs/engine, -executor picks its model executor), llamacpp (a llama.cpp llama-server), vllm or sglang")
	fs.StringVar(&e.URL, "engine-url", "", "base URL of the engine server (http://host:port): one already running, or the one -engine-cmd starts")
	fs.StringVar(&e.KVEvents, "engine-kv-events", "", `KV events: empty means llamacpp synthesizes them from its slots, vllm/sglang publish none; "none" publishes none (the router approximates); a ZeroMQ endpoint (tcp://host:5557) is a vLLM/SGLang engine's KV event publisher`)
	fs.StringVar(&e.KVReplay, "engine-kv-replay", "", "ZeroMQ endpoint of a vLLM/SGLang engine's KV event replay socket (fills gaps after a reconnect)")
	fs.StringVar(&e.Cmd, "engine-cmd", "", "command line (split on spaces, no shell) the worker starts as its engine and stops with itself; it must answer at -engine-url")
	fs.StringVar(&e.LlamaServerBin, "llama-server-bin", "", "llamacpp: start this llama-server binary on a free loopback port, serving -model (a GGUF file), and stop it with the worker")
	fs.IntVar(&e.Slots, "engine-slots", 4, "llamacpp with -llama-server-bin: slots (--parallel), each serving one request at a time")
	fs.IntVar(&e.Context, "engine-context", 0, "llamacpp with -llama-server-bin: tokens a slot holds (prompt and output); 0 means the model's context")
	fs.StringVar(&e.ExtraArgs, "engine-args", "", "llamacpp with -llama-server-bin: more llama-server arguments (split on spaces), e.g. --threads 4")
	fs.DurationVar(&e.StartTimeout, "engine-start-timeout", 2*time.Minute, "how long the engine may take to answer at start-up (loading its model)")
	fs.StringVar(&e.LogFile, "engine-log", "", "file the started engine's output is appended to; empty keeps only its last lines, for errors")
}

// validateEngine checks the engine flags. For an engine other than the
// built-in one it fills in the tokenizer path and the model name, as
// validateLlama does for the built-in engine.
func (c *Config) validateEngine() error {
	e := &c.EngineCfg
	external := []struct{ name, v string }{
		{"engine-url", e.URL}, {"engine-cmd", e.Cmd}, {"llama-server-bin", e.LlamaServerBin},
		{"engine-kv-events", e.KVEvents}, {"engine-kv-replay", e.KVReplay}, {"engine-args", e.ExtraArgs}, {"engine-log", e.LogFile},
	}
	switch e.Engine {
	case EngineBuiltin:
		for _, f := range external {
			if f.v != "" {
				return fmt.Errorf("-%s=%q: only with -engine=%s, %s or %s", f.name, f.v, EngineLlamaCpp, EngineVLLM, EngineSGLang)
			}
		}
		return nil
	case EngineLlamaCpp, EngineVLLM, EngineSGLang:
	default:
		return fmt.Errorf("-engine=%q: want %s, %s, %s or %s", e.Engine, EngineBuiltin, EngineLlamaCpp, EngineVLLM, EngineSGLang)
	}
	if c.hasTiers() {
		return fmt.Errorf("-kv-host-blocks/-kv-disk-blocks/-kv-s3-bucket: KV tiers below the arena need -engine=%s (-engine=%s keeps its KV itself)", EngineBuiltin, e.Engine)
	}
	if e.StartTimeout <= 0 {
		return fmt.Errorf("-engine-start-timeout=%v: must be positive", e.StartTimeout)
	}
	if err := e.validateStart(); err != nil {
		return err
	}
	if e.Engine == EngineLlamaCpp {
		if err := c.validateLlamaCpp(); err != nil {
			return err
		}
	} else if err := c.validateVLLM(); err != nil {
		return err
	}
	return c.resolveEngineTokenizer()
}

// validateStart checks how the engine is reached: a URL, a command that
// serves it, or (llamacpp) a llama-server the worker starts.
func (e *EngineConfig) validateStart() error {
	switch {
	case e.LlamaServerBin != "" && e.Engine != EngineLlamaCpp:
		return fmt.Errorf("-llama-server-bin=%q: only with -engine=%s", e.LlamaServerBin, EngineLlamaCpp)
	case e.LlamaServerBin != "" && (e.URL != "" || e.Cmd != ""):
		return fmt.Errorf("-llama-server-bin=%q: the worker starts that llama-server on a port of its own; drop -engine-url and -engine-cmd", e.LlamaServerBin)
	case e.Cmd != "" && e.URL == "":
		return fmt.Errorf("-engine-cmd=%q: needs -engine-url, where the command's server answers", e.Cmd)
	case e.LlamaServerBin == "" && e.URL == "":
		if e.Engine == EngineLlamaCpp {
			return fmt.Errorf("-engine=%s: set -engine-url (a running llama-server) or -llama-server-bin and -model (the worker starts one)", e.Engine)
		}
		return fmt.Errorf("-engine=%s: set -engine-url", e.Engine)
	case e.LlamaServerBin == "" && (e.ExtraArgs != "" || e.Context != 0):
		return fmt.Errorf("-engine-args/-engine-context: only with -llama-server-bin (the worker starts the engine)")
	}
	if e.URL != "" {
		u, err := url.Parse(e.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("-engine-url=%q: want http://host:port", e.URL)
		}
	}
	if e.Cmd != "" {
		if _, err := execPath("engine-cmd", strings.Fields(e.Cmd)[0]); err != nil {
			return err
		}
	}
	if e.LlamaServerBin != "" {
		if _, err := execPath("llama-server-bin", e.LlamaServerBin); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateLlamaCpp() error {
	e := &c.EngineCfg
	if e.KVEvents != "" && e.KVEvents != KVEventsNone || e.KVReplay != "" {
		return fmt.Errorf("-engine-kv-events=%q -engine-kv-replay=%q: llama.cpp publishes no KV events; leave them empty (the worker synthesizes them from its slots) or set -engine-kv-events=%s", e.KVEvents, e.KVReplay, KVEventsNone)
	}
	if e.LlamaServerBin == "" {
		if c.Model != "" {
			return fmt.Errorf("-model=%q: with -engine-url the engine has its model; -model is what -llama-server-bin serves", c.Model)
		}
		return nil
	}
	if c.Model == "" {
		return fmt.Errorf("-llama-server-bin=%q: needs -model, the GGUF file it serves", e.LlamaServerBin)
	}
	if err := regularFile("model", c.Model); err != nil {
		return err
	}
	g, err := llamacpp.ReadGGUF(c.Model)
	if err != nil {
		return fmt.Errorf("-model=%q: %w (convert a llama2.c checkpoint with go run ./libs/engine/cmd/llama2gguf)", c.Model, err)
	}
	e.gguf = g
	switch {
	case e.Slots < 1 || e.Slots > 256:
		return fmt.Errorf("-engine-slots=%d: want 1 to 256", e.Slots)
	case e.Context < 0 || e.Context > g.ContextLen:
		return fmt.Errorf("-engine-context=%d: want 0 (the model's) to %d, the context of -model=%q", e.Context, g.ContextLen, c.Model)
	}
	if e.Context == 0 {
		e.Context = g.ContextLen
	}
	if e.Context < 2*c.BlockSize {
		return fmt.Errorf("-engine-context=%d: under two blocks of -block-size=%d", e.Context, c.BlockSize)
	}
	if c.ModelName == "" {
		c.ModelName = g.Name
		if c.ModelName == "" {
			base := filepath.Base(c.Model)
			c.ModelName = strings.TrimSuffix(base, filepath.Ext(base))
		}
	}
	return nil
}

func (c *Config) validateVLLM() error {
	e := &c.EngineCfg
	switch {
	case c.Model != "":
		return fmt.Errorf("-model=%q: a %s engine has its model; name it with -model-name", c.Model, e.Engine)
	case c.ModelName == "":
		return fmt.Errorf("-engine=%s: needs -model-name, the engine's served model name", e.Engine)
	case e.KVReplay != "" && !isZMQ(e.KVEvents):
		return fmt.Errorf("-engine-kv-replay=%q: needs -engine-kv-events, the publisher's endpoint", e.KVReplay)
	case e.KVEvents != "" && e.KVEvents != KVEventsNone && !isZMQ(e.KVEvents):
		return fmt.Errorf("-engine-kv-events=%q: want a ZeroMQ endpoint (tcp://host:port, ipc://path) or %s", e.KVEvents, KVEventsNone)
	case e.KVReplay != "" && !isZMQ(e.KVReplay):
		return fmt.Errorf("-engine-kv-replay=%q: want a ZeroMQ endpoint (tcp://host:port, ipc://path)", e.KVReplay)
	}
	return nil
}

func isZMQ(s string) bool { return strings.HasPrefix(s, "tcp://") || strings.HasPrefix(s, "ipc://") }

// resolveEngineTokenizer finds the tokenizer the frontend gets:
// -tokenizer (a GGUF file, a Hugging Face tokenizer.json or a llama2.c
// tokenizer.bin), else the vocabulary of the GGUF -model itself.
func (c *Config) resolveEngineTokenizer() error {
	if c.Tokenizer != "" {
		return regularFile("tokenizer", c.Tokenizer)
	}
	if c.Model != "" && c.EngineCfg.gguf.VocabSize > 0 {
		c.Tokenizer = c.Model
		return nil
	}
	return fmt.Errorf("-tokenizer: required with -engine=%s and no GGUF -model (the engine's vocabulary, which the frontend tokenizes with: a GGUF file, a tokenizer.json or a llama2.c tokenizer.bin)", c.EngineCfg.Engine)
}

// execPath checks that path (or a name on PATH) is an executable file.
func execPath(flagName, path string) (string, error) {
	p := path
	if !strings.Contains(path, "/") {
		if lp, err := exec.LookPath(path); err == nil {
			p = lp
		}
	}
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return "", fmt.Errorf("-%s=%q: %w", flagName, path, err)
	case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("-%s=%q: not an executable file", flagName, path)
	}
	return p, nil
}
