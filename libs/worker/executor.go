package worker

import (
	"fmt"
	"os"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/sim"
)

// Tokenizer kinds reported by GetModelInfo.
const (
	TokenizerLlama2c = "llama2c"
	TokenizerBytes   = "bytes"
)

// model is a loaded executor and the tokenizer clients need to mirror it.
type model struct {
	exec          executor.Executor
	tokenizer     []byte // the tokenizer file, empty for the byte tokenizer
	tokenizerKind string
}

// openModel builds the executor that c (validated) selects.
func (c *Config) openModel() (model, error) {
	switch c.Executor {
	case ExecutorSim:
		return c.openSim()
	case ExecutorLlama:
		if c.Model == "" {
			exec, err := llama.NewTinyRandom(llama.Config{}, c.Seed, llama.Options{Name: c.ModelName})
			if err != nil {
				return model{}, fmt.Errorf("tiny random model: %w", err)
			}
			return model{exec: exec, tokenizerKind: TokenizerBytes}, nil
		}
		exec, err := llama.Open(c.Model, c.Tokenizer, llama.Options{Name: c.ModelName})
		if err != nil {
			return model{}, fmt.Errorf("-model=%q -tokenizer=%q: %w", c.Model, c.Tokenizer, err)
		}
		tok, err := os.ReadFile(c.Tokenizer)
		if err != nil {
			return model{}, fmt.Errorf("-tokenizer=%q: %w", c.Tokenizer, err)
		}
		return model{exec: exec, tokenizer: tok, tokenizerKind: TokenizerLlama2c}, nil
	}
	return model{}, fmt.Errorf("-executor=%q: want %s or %s", c.Executor, ExecutorLlama, ExecutorSim)
}

func (c *Config) openSim() (model, error) {
	sc := sim.Config{Name: c.ModelName, VocabSize: c.SimVocab, ContextLen: c.SimContext, SpeedUp: c.SimSpeedup, KVBytesPerToken: c.SimKVBytes}
	if c.SimProfile != "" {
		p, err := sim.LoadProfile(c.SimProfile)
		if err != nil {
			return model{}, fmt.Errorf("-sim-profile=%q: %w", c.SimProfile, err)
		}
		sc.Timing = p
	}
	exec, err := sim.New(sc)
	if err != nil {
		return model{}, fmt.Errorf("-executor=sim: %w", err)
	}
	return model{exec: exec, tokenizerKind: TokenizerBytes}, nil
}
