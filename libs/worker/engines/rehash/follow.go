package rehash

import (
	"context"

	"switchyard.dev/libs/vllmevents"
)

// Follow subscribes to the engine's event socket described by cfg and
// re-hashes what arrives until ctx ends (returning ctx.Err()) or a batch
// is refused (an error wrapping ErrBlockSize). vllmevents redials and
// fills gaps from the replay socket by itself; what it cannot fill reaches
// HandleGap.
//
// With a replay socket (cfg.ReplayEndpoint) and no position of its own
// (cfg.Resume unset), the subscription asks for everything from the
// engine's first batch: a worker that starts after its engine then
// rebuilds the blocks still in the engine's replay buffer (vLLM's
// buffer_steps) rather than dropping their children as orphans. Replaying
// only a suffix of the history is still sound: a block is kept only if
// the suffix stored it and did not remove it.
func (r *Rehasher) Follow(ctx context.Context, cfg vllmevents.Config) error {
	if cfg.ReplayEndpoint != "" && !cfg.Resume {
		cfg.Resume, cfg.ResumeFrom = true, 0
	}
	if cfg.Logger == nil {
		cfg.Logger = r.log
	}
	return r.subscribe(ctx, cfg, r)
}
