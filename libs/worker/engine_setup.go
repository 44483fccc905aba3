package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"time"

	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/vllmevents"
	"switchyard.dev/libs/worker/engines"
	"switchyard.dev/libs/worker/engines/llamacpp"
	"switchyard.dev/libs/worker/engines/vllm"
	"switchyard.dev/libs/worker/engines/vllmworker"
	"switchyard.dev/libs/worker/handler"
	"switchyard.dev/libs/worker/metrics"
)

// setupEngine is Setup for an engine other than the built-in one: the
// engine is started (when the worker owns it) and checked before the
// instance registers, so a registered worker serves at once. Such a
// worker neither prefills remotely nor keeps KV tiers: its engine keeps
// its KV itself.
func setupEngine(ctx context.Context, rt *service.Runtime, cfg *Config) error {
	log := rt.Logger.With("component", "engine", "engine", cfg.EngineCfg.Engine)
	tf, err := readTokenizerFile(cfg.Tokenizer)
	if err != nil {
		return err
	}
	tok := tf.tok
	startCtx, cancel := context.WithTimeout(ctx, cfg.EngineCfg.StartTimeout)
	defer cancel()
	proc, err := startEngineProcess(cfg, log)
	if err != nil {
		return err
	}
	eng, err := openEngine(startCtx, cfg, proc, tok, log)
	if err != nil {
		proc.stop(log)
		return err
	}
	if cfg.ModelName == "" {
		cfg.ModelName = eng.ModelInfo().Name // -engine-url without -model-name: the engine's
	}
	unregister, err := metrics.Register(rt.Telemetry.Meter, eng, nil, metrics.WithModel(cfg.ModelName))
	if err != nil {
		proc.stop(log)
		return err
	}
	h := handler.New(handler.Config{Backend: eng, Model: cfg.ModelName, Tokenizer: tf.data, TokenizerKind: tf.kind, ChatTemplate: tf.chatTemplate, Logger: log, Cordon: cordoner(rt)})
	rt.Server.Mount(workerv1connect.NewWorkerServiceHandler(h, rt.Server.HandlerOptions()...))
	mi := eng.ModelInfo()
	meta := Meta(cfg.EngineCfg.Engine, mi)
	rt.Server.UpdateInstance(func(in *discovery.Instance) {
		in.Model = cfg.ModelName
		if in.Meta == nil {
			in.Meta = make(map[string]string, len(meta))
		}
		maps.Copy(in.Meta, meta)
	})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		health := func(err error) {
			if err != nil {
				err = fmt.Errorf("engine: %w", err)
			}
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if serr := rt.Server.SetHealthy(hctx, err); serr != nil {
				log.Warn("reporting the engine's health to discovery", "err", serr)
			}
		}
		runEngine(ctx, eng, proc, h, drainWindow(rt.Server.DrainTimeout()), health, log)
		_ = unregister()
	}()
	rt.AfterDrain(func(dctx context.Context) {
		select {
		case <-stopped:
		case <-dctx.Done():
			log.Warn("worker teardown still running at exit")
		}
	})
	log.Info("worker ready", "model", cfg.ModelName, "url", proc.url(cfg), "vocab", mi.VocabSize,
		"context", mi.ContextLen, "kv_blocks", mi.NumBlocks, "block_size", mi.BlockSize, "kv_events", eng.KV() != nil)
	return nil
}

// runEngine runs eng (restarting the process the worker owns when it
// dies) until ctx has ended and h has drained, then stops it.
func runEngine(ctx context.Context, eng engines.Engine, proc *engineProcess, h *handler.Handler, window time.Duration, health func(error), log *slog.Logger) {
	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := eng.Run(engCtx, health); err != nil && engCtx.Err() == nil {
			log.Error("engine", "err", err)
		}
	}()
	superDone := make(chan struct{})
	go func() {
		defer close(superDone)
		proc.supervise(engCtx, eng, log)
	}()
	<-ctx.Done()
	drain(h, window, log)
	stopEngine()
	<-done
	<-superDone
	proc.stop(log)
	if err := eng.Close(); err != nil {
		log.Warn("closing engine", "err", err)
	}
}

// openEngine connects to the engine, waiting until it answers or ctx ends;
// an engine that answers but is not the one configured fails at once.
func openEngine(ctx context.Context, cfg *Config, proc *engineProcess, tok tokenizer.Tokenizer, log *slog.Logger) (engines.Engine, error) {
	url := proc.url(cfg)
	open := func(ctx context.Context) (engines.Engine, error) {
		switch cfg.EngineCfg.Engine {
		case EngineLlamaCpp:
			return llamacpp.Open(ctx, llamacpp.Config{URL: url, Model: cfg.ModelName, Tokenizer: tok, BlockSize: cfg.BlockSize,
				KVEvents: cfg.EngineCfg.KVEvents != KVEventsNone, EventBuffer: cfg.EventBuffer, Logger: log})
		default:
			kind, err := vllm.ParseKind(cfg.EngineCfg.Engine)
			if err != nil {
				return nil, err
			}
			vc := vllmworker.Config{Kind: kind, URL: url, Model: cfg.ModelName, Tokenizer: tok, BlockSize: cfg.BlockSize, EventBuffer: cfg.EventBuffer, Logger: log}
			if e := cfg.EngineCfg.KVEvents; e != "" && e != KVEventsNone {
				vc.Events = &vllmevents.Config{Endpoint: e, ReplayEndpoint: cfg.EngineCfg.KVReplay}
			}
			return vllmworker.Open(ctx, vc)
		}
	}
	for {
		eng, err := open(ctx)
		if err == nil {
			return eng, nil
		}
		if !notAnswering(err) {
			return nil, fmt.Errorf("%s: %w", proc.setting(cfg), err)
		}
		select {
		case <-proc.exited():
			return nil, fmt.Errorf("%s: the engine exited during start-up: %w\n%s", proc.setting(cfg), proc.p.Err(), proc.p.Tail())
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no answer within -engine-start-timeout=%v: %w", proc.setting(cfg), cfg.EngineCfg.StartTimeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// notAnswering tells an engine that is not (yet) up from one that answers
// wrongly: refused or broken connections, and 503 while a model loads.
func notAnswering(err error) bool {
	if errors.Is(err, engines.ErrUnavailable) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	var ee *vllm.EngineError
	return errors.As(err, &ee) && ee.Status == http.StatusServiceUnavailable
}
