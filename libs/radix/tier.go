package radix

import "fmt"

// Tier is a storage tier of the KV cache, ordered from fastest to slowest.
type Tier uint8

// The tiers, fastest first. Match reports depths cumulatively along this
// order, so the order is part of the contract.
const (
	TierDevice   Tier = iota // GPU HBM (vLLM medium "GPU")
	TierHost                 // CPU DRAM
	TierDisk                 // local SSD
	TierExternal             // remote or shared storage
)

// NumTiers is the number of tiers.
const NumTiers = 4

// String returns the tier's lower-case name.
func (t Tier) String() string {
	switch t {
	case TierDevice:
		return "device"
	case TierHost:
		return "host"
	case TierDisk:
		return "disk"
	case TierExternal:
		return "external"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// Valid reports whether t is one of the defined tiers.
func (t Tier) Valid() bool { return t < NumTiers }

// Mask returns the single-tier mask of t.
func (t Tier) Mask() TierMask { return 1 << t }

// TierMask is a set of tiers: bit t is set when the block is held in tier t.
type TierMask uint8

// allTiers is the mask of every defined tier.
const allTiers TierMask = 1<<NumTiers - 1

// Has reports whether m contains tier t.
func (m TierMask) Has(t Tier) bool { return m&t.Mask() != 0 }

// Valid reports whether m is non-empty and names only defined tiers.
func (m TierMask) Valid() bool { return m != 0 && m&^allTiers == 0 }

// upTo returns the mask of tiers no slower than t: a block counts towards a
// worker's depth for tier t when it is held in any of these.
func upTo(t Tier) TierMask { return 1<<(t+1) - 1 }
