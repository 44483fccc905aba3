// Package kvtier names the storage tiers a KV-cache block can live in:
// device (GPU) memory, host memory, local disk and external stores.
//
// This is the single definition of the tiers. The engine tags its KV events
// with them (libs/engine/kvevent), the vLLM event codec maps media names to
// them (libs/vllmevents), the router's prefix index keeps per-tier holders
// (libs/radix) and the routing policy weighs overlap per tier. Wire formats
// keep their own enums (switchyard.common.v1.StorageTier, vLLM's medium
// strings); each edge converts between those and Tier.
//
// # Why a module of its own
//
// Both sides of the KV event path need the tier names, and neither should
// pull in the other's code to get them: the engine must not depend on the
// router's index (libs/radix) or on a ZeroMQ/msgpack codec
// (libs/vllmevents), and the codec and the index hash nothing, so they
// should not build the xxh3 code of libs/kvhash. A leaf module that imports
// nothing can be required by all of them without forming a cycle.
//
// # Invariants
//
// Tiers are ordered fastest first and numbered from 0. The order is part of
// the contract: the index reports prefix depths cumulatively along it, and
// the zero Tier is Device, the tier vLLM assumes when an event names no
// medium. A Mask has one bit per tier in a byte (the index packs masks into
// 4 bits and snapshots store them as one byte); All is a Mask constant, so
// a ninth tier would not compile.
package kvtier

import "fmt"

// Tier is a storage tier of the KV cache.
type Tier uint8

// The tiers, fastest first.
const (
	Device   Tier = iota // accelerator memory: GPU HBM, or the engine's own arena
	Host                 // CPU DRAM
	Disk                 // local SSD
	External             // remote or shared storage (LMCache, object stores)
)

// Count is the number of tiers; arrays indexed by Tier have this length.
const Count = int(External) + 1

// All is the mask of every tier.
const All Mask = 1<<Count - 1

// String returns the tier's lower-case name.
func (t Tier) String() string {
	switch t {
	case Device:
		return "device"
	case Host:
		return "host"
	case Disk:
		return "disk"
	case External:
		return "external"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// Valid reports whether t is one of the defined tiers.
func (t Tier) Valid() bool { return int(t) < Count }

// Mask returns the single-tier mask of t.
func (t Tier) Mask() Mask { return 1 << t }

// Mask is a set of tiers: bit t is set when a block is held in tier t.
type Mask uint8

// Has reports whether m contains tier t.
func (m Mask) Has(t Tier) bool { return m&t.Mask() != 0 }

// Valid reports whether m is non-empty and names only defined tiers.
func (m Mask) Valid() bool { return m != 0 && m&^All == 0 }
