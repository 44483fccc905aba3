package mooncake

import (
	"fmt"
	"time"
)

// Replay is how records become requests when a trace is replayed: prompts
// synthesized and capped, generations capped, arrivals offset from the
// first record, compressed by Speed and then warped by Rate. loadtest
// (against a live mesh) and the router's routesim (on a virtual clock) both
// follow it, so their requests are the same.
type Replay struct {
	Synth Synth
	// Speed divides trace timestamps: 2 replays twice as fast.
	Speed float64
	// Rate, when set, varies the arrival rate over the replay: offsets
	// already divided by Speed are warped so the rate is multiplied by the
	// profile's m(t).
	Rate *Warper
	// MaxInputTokens and MaxOutputTokens cap prompt and generation length
	// when positive (after block scaling).
	MaxInputTokens  int
	MaxOutputTokens int
}

// Validate reports a setting no replay can use.
func (r Replay) Validate() error {
	if err := r.Synth.Validate(); err != nil {
		return err
	}
	switch {
	case !(r.Speed > 0):
		return fmt.Errorf("speed %g must be > 0", r.Speed)
	case r.MaxInputTokens < 0:
		return fmt.Errorf("max input tokens %d must be >= 0", r.MaxInputTokens)
	case r.MaxOutputTokens < 0:
		return fmt.Errorf("max output tokens %d must be >= 0", r.MaxOutputTokens)
	}
	return nil
}

// At is rec's arrival in a replay that starts with first; Never when Rate
// never reaches it.
func (r Replay) At(rec, first Record) time.Duration {
	d := time.Duration((rec.TimestampMs - first.TimestampMs) / r.Speed * float64(time.Millisecond))
	if r.Rate != nil {
		return r.Rate.Offset(d)
	}
	return d
}

// Prompt appends rec's replayed prompt to dst.
func (r Replay) Prompt(dst []int, rec Record) []int {
	return r.Synth.Tokens(dst, rec, r.MaxInputTokens)
}

// Output is rec's replayed generation length.
func (r Replay) Output(rec Record) int {
	if r.MaxOutputTokens > 0 {
		return min(rec.OutputLength, r.MaxOutputTokens)
	}
	return rec.OutputLength
}
