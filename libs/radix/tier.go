package radix

import "switchyard.dev/libs/kvtier"

// upTo returns the mask of tiers no slower than t: a block counts towards a
// worker's depth for tier t when it is held in any of these.
func upTo(t kvtier.Tier) kvtier.Mask { return 1<<(t+1) - 1 }
