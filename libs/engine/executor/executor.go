// Package executor is the contract between the engine's scheduler and the
// code that runs a model step: a real forward pass (package llama) or a
// timing simulation (package sim). The engine owns sequences and KV blocks;
// an executor only reads the batch it is given, reads and writes the KV
// blocks named in it, and reports one sampled token per item that asks.
package executor

import (
	"context"

	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/engine/tokenizer"
)

// Model describes what the executor serves.
type Model struct {
	Name       string
	VocabSize  int
	ContextLen int // longest sequence (prompt + output) the model supports
	BOS, EOS   uint32
	// StopTokens end generation unless the request ignores EOS. llama2.c
	// models stop on BOS as well as EOS (run.c stops when BOS is emitted).
	StopTokens []uint32
	// KVBytesPerToken is the KV memory one token takes across all layers
	// (K and V); 0 means the executor keeps no KV memory.
	KVBytesPerToken int
	// Logits reports that Execute computes logits and samples with
	// Item.Sampler, so requests may ask for logprobs; a timing simulator
	// derives its tokens from Item.Seed instead.
	Logits bool
}

// KV is the paged KV memory an executor reads and writes. Block b occupies
// Arena[b*BlockBytes : (b+1)*BlockBytes]; inside a block the executor
// chooses the layout (llama: per layer, K then V, each BlockSize rows).
type KV struct {
	Arena      []byte
	BlockSize  int
	BlockBytes int
	NumBlocks  int
}

// Item is one sequence's share of a step: compute positions [Start, End)
// of Tokens, whose KV goes to the slots named by Blocks.
type Item struct {
	SeqID     uint64
	Tokens    []uint32 // every known token: prompt then generated
	PromptLen int
	Start     int
	End       int
	// Blocks[p/BlockSize] holds position p's KV for every p < End.
	Blocks []int
	// Sample asks for the token after position End-1 (End == len(Tokens)).
	Sample  bool
	Sampler *sample.Sampler
	// Seed is the request seed, or a hash of the prompt when it has none;
	// executors without logits derive their tokens from it.
	Seed uint64
	// Out receives the sampled token when Sample is set.
	Out uint32
}

// Batch is one scheduler step.
type Batch struct {
	Items []Item
	// PrefillTokens counts tokens computed for items that are still in
	// their prompt; DecodeTokens counts single-token decode items.
	PrefillTokens int
	DecodeTokens  int
	// KV occupancy when the step was planned, for timing models.
	UsedBlocks, TotalBlocks int
}

// Executor runs steps. Execute is only ever called from one goroutine.
type Executor interface {
	Model() Model
	Tokenizer() tokenizer.Tokenizer
	// Bind hands over the KV memory before the first Execute.
	Bind(kv KV) error
	// Execute computes the batch and sets Out for every item with Sample.
	Execute(ctx context.Context, b *Batch) error
}
