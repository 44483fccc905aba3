package llamacpp

import (
	"context"
	"time"
)

// Run implements engines.Engine: it reads the server's health and load
// every PollInterval. When the server stops answering (or Down reports
// its process gone) the worker is told, every mirror is cleared (one
// Cleared event: whatever comes back starts empty) and new requests are
// refused as Unavailable; when it answers again and still serves the
// model, the worker is told it is healthy.
func (e *Engine) Run(ctx context.Context, health func(error)) error {
	t := time.NewTicker(e.cfg.PollInterval)
	defer t.Stop()
	for {
		var down error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case down = <-e.down:
		case <-t.C:
			down = e.poll(ctx)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch was := e.healthy.Load(); {
		case down != nil && was:
			e.healthy.Store(false)
			e.slots.clear()
			e.log.Error("llama-server is down", "url", e.c.base, "err", down)
			health(down)
		case down == nil && !was:
			if _, err := e.identify(ctx); err != nil {
				e.log.Warn("llama-server answers again but cannot be served", "err", err)
				continue
			}
			e.slots.clear()
			e.healthy.Store(true)
			e.log.Info("llama-server is back", "url", e.c.base)
			health(nil)
		}
	}
}

// Down reports that the server's process exited: Run marks the engine
// down at once rather than at its next poll.
func (e *Engine) Down(err error) {
	select {
	case e.down <- err:
	default:
	}
}

// poll reads health and load; its error means the server is down.
func (e *Engine) poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(e.cfg.PollInterval, 2*time.Second))
	defer cancel()
	if err := e.c.health(ctx); err != nil {
		return err
	}
	var l serverLoad
	var err error
	if l.m, err = e.c.metrics(ctx); err != nil {
		e.log.Debug("llama-server metrics", "err", err)
	}
	if l.busy, err = e.c.busySlots(ctx); err != nil {
		e.log.Debug("llama-server slots", "err", err)
	}
	e.load.Store(&l)
	return nil
}
