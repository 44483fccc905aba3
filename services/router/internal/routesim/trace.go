package routesim

import (
	"fmt"
	"iter"

	"switchyard.dev/libs/mooncake"
)

// Requests turns recs (sorted by timestamp, as mooncake.Read returns them)
// into the requests loadtest would send for them under r. Each prompt is
// synthesized only when the replay reaches it, so a whole trace never sits
// in memory as tokens.
func Requests(recs []mooncake.Record, r mooncake.Replay) (iter.Seq[Request], error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("routesim: %w", err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("routesim: no trace records")
	}
	return func(yield func(Request) bool) {
		var toks []int
		for _, rec := range recs {
			toks = r.Prompt(toks[:0], rec)
			prompt := make([]uint32, len(toks))
			for i, t := range toks {
				prompt[i] = uint32(t)
			}
			if !yield(Request{At: r.At(rec, recs[0]), Prompt: prompt, Output: r.Output(rec)}) {
				return
			}
		}
	}, nil
}
