package worker

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
)

// tierTimesEvery is how often the measured tier times are looked at;
// they are published only when one moved by more than tierTimesMoved
// (a share of its last published value), so discovery is not rewritten
// for noise.
const (
	tierTimesEvery = 5 * time.Second
	tierTimesMoved = 0.1
)

// publishTierTimes keeps the worker's discovery record's measured tier
// load times and prefill time per block current, until ctx ends.
func publishTierTimes(ctx context.Context, eng *engine.Engine, publish func(context.Context, func(map[string]string)) error, log *slog.Logger) {
	var last tierTimes
	tick := time.NewTicker(tierTimesEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := measuredTierTimes(eng.Metrics())
		if !now.movedFrom(last) {
			continue
		}
		err := publish(ctx, func(meta map[string]string) {
			meta[discovery.MetaKVLoadNanos] = now.load.String()
			if now.prefill > 0 {
				meta[discovery.MetaKVPrefillBlockNanos] = strconv.FormatInt(now.prefill.Nanoseconds(), 10)
			}
		})
		if err != nil {
			log.Debug("publishing measured tier times", "err", err)
			continue
		}
		last = now
	}
}

type tierTimes struct {
	load    kvtier.Times
	prefill time.Duration
}

func measuredTierTimes(m engine.Metrics) tierTimes {
	var out tierTimes
	for _, t := range m.Tiers {
		if t.LoadNanosPerBlk > 0 && t.Tier.Valid() {
			out.load[t.Tier] = time.Duration(t.LoadNanosPerBlk)
		}
		if t.RecomputeNanosPerBlk > 0 {
			out.prefill = time.Duration(t.RecomputeNanosPerBlk)
		}
	}
	return out
}

// movedFrom reports whether any time appeared, vanished or moved by more
// than tierTimesMoved since last.
func (tt tierTimes) movedFrom(last tierTimes) bool {
	moved := func(a, b time.Duration) bool {
		if (a == 0) != (b == 0) {
			return true
		}
		return b != 0 && math.Abs(float64(a-b))/float64(b) > tierTimesMoved
	}
	for t := range tt.load {
		if moved(tt.load[t], last.load[t]) {
			return true
		}
	}
	return moved(tt.prefill, last.prefill)
}
