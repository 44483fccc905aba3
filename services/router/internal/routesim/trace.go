package routesim

import (
	"fmt"
	"iter"
	"time"

	"switchyard.dev/libs/trace"
)

// Replay says how trace records become requests, as loadtest replays them
// (`make bench`).
type Replay struct {
	Synth trace.Synth
	// Rate compresses the trace's clock: 2 replays it twice as fast (twice
	// the load); 0 means 1.
	Rate float64
	// MaxInputTokens and MaxOutputTokens cap prompts and generations (0:
	// no cap).
	MaxInputTokens, MaxOutputTokens int
}

// Requests turns recs (sorted by timestamp, as trace.Read returns them)
// into requests, synthesizing each prompt only when the replay reaches it,
// so a whole trace never sits in memory as tokens.
func (r Replay) Requests(recs []trace.Record) (iter.Seq[Request], error) {
	if err := r.Synth.Validate(); err != nil {
		return nil, fmt.Errorf("routesim: %w", err)
	}
	if r.Rate < 0 || r.MaxInputTokens < 0 || r.MaxOutputTokens < 0 {
		return nil, fmt.Errorf("routesim: negative setting in %+v", r)
	}
	rate := r.Rate
	if rate == 0 {
		rate = 1
	}
	return func(yield func(Request) bool) {
		var toks []int
		for _, rec := range recs {
			toks = r.Synth.Tokens(toks[:0], rec, r.MaxInputTokens)
			prompt := make([]uint32, len(toks))
			for i, t := range toks {
				prompt[i] = uint32(t)
			}
			out := rec.OutputLength
			if r.MaxOutputTokens > 0 {
				out = min(out, r.MaxOutputTokens)
			}
			at := time.Duration(rec.TimestampMs / rate * float64(time.Millisecond))
			if !yield(Request{At: at, Prompt: prompt, Output: out}) {
				return
			}
		}
	}, nil
}
