package vllmevents

import (
	"fmt"

	"switchyard.dev/libs/kvtier"
)

// Kind is the type of an Event.
type Kind uint8

// The event kinds, named after vLLM's event classes.
const (
	KindStored  Kind = iota + 1 // BlockStored
	KindRemoved                 // BlockRemoved
	KindCleared                 // AllBlocksCleared
)

func (k Kind) String() string {
	switch k {
	case KindStored:
		return "BlockStored"
	case KindRemoved:
		return "BlockRemoved"
	case KindCleared:
		return "AllBlocksCleared"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Stored is a BlockStored event: the worker now caches Hashes, a chain of
// consecutive full blocks whose first block follows Parent.
type Stored struct {
	Hashes    []uint64
	Parent    uint64
	HasParent bool
	TokenIDs  []uint32 // len(Hashes)*BlockSize tokens, in order
	BlockSize int
	LoraID    int64
	HasLoraID bool
	LoraName  string
	Tier      kvtier.Tier // mapped from the medium; an absent medium is Device
	// HasExtraKeys: some block's extra_keys entry is set (multimodal
	// inputs, a cache salt, prompt embeddings): the engine's hash covers
	// more than TokenIDs, so the tokens alone do not name the block.
	HasExtraKeys bool
}

// Removed is a BlockRemoved event: the worker evicted Hashes from Tier.
type Removed struct {
	Hashes []uint64
	Tier   kvtier.Tier
}

// Event is one decoded KV event: Kind says which payload field is set.
// (A flat struct rather than an interface, so decoding boxes nothing.)
type Event struct {
	Kind    Kind
	Stored  Stored  // when Kind == KindStored
	Removed Removed // when Kind == KindRemoved
}

// Batch is one published message: the events of one engine step.
type Batch struct {
	TS        float64 // seconds since the Unix epoch, engine clock
	Events    []Event
	DPRank    int64 // data-parallel rank, when HasDPRank
	HasDPRank bool
	// Skipped counts events of unknown types that were skipped. A consumer
	// that cannot tolerate unknown changes may treat Skipped > 0 as a gap.
	Skipped int
}
