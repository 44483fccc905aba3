// Package worker is the inference worker that the prefill and decode
// services share (services never import each other, so the code lives
// here): flags that pick and size a model executor, an engine loop, the
// Connect WorkerService (package handler), metrics (package metrics), and
// the discovery record routers and planners read.
//
// A service's whole wiring is Spec(role, version, defaultListen). Setup
// loads the model before the instance registers, so a registered worker
// can serve at once, and its discovery record carries the model name and
// KV geometry (meta kv_blocks, block_size, context_length, executor, plus
// the GPUs from libs/cuda).
//
// Shutdown: when the Setup context ends the handler drains (new
// generations get Unavailable, KV event streams end), in-flight
// generations keep running on the engine for up to the drain timeout
// less a margin, then the engine loop stops and whatever is left ends
// with Unavailable before the server closes connections.
package worker

import (
	"context"
	"log/slog"
	"maps"
	"strconv"
	"time"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"

	meshv1 "switchyard.dev/gen/switchyard/mesh/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/cuda"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/worker/disagg"
	"switchyard.dev/libs/worker/handler"
	"switchyard.dev/libs/worker/metrics"
)

// Spec is the service.Spec of a worker with the given role ("prefill" or
// "decode") and default listen address. Each call has its own Config.
func Spec(role, version, defaultListen string) service.Spec {
	cfg := new(Config)
	return service.Spec{
		Role:          role,
		Version:       version,
		DefaultListen: defaultListen,
		Flags:         cfg.Register,
		Validate:      cfg.Validate,
		Setup: func(ctx context.Context, rt *service.Runtime) error {
			return Setup(ctx, rt, cfg)
		},
	}
}

// Setup loads the model, mounts the WorkerService and metrics, publishes
// the discovery record, and runs the engine until ctx ends and the drain
// is over. cfg must have passed Validate.
func Setup(ctx context.Context, rt *service.Runtime, cfg *Config) error {
	if cfg.EngineCfg.Engine != "" && cfg.EngineCfg.Engine != EngineBuiltin {
		return setupEngine(ctx, rt, cfg)
	}
	log := rt.Logger
	m, err := cfg.openModel()
	if err != nil {
		return err
	}
	var rep *sharedReporter
	if cfg.S3Bucket != "" {
		rep = newSharedReporter(rt.Server.Instance().ID, cfg.ModelName, cfg.BlockSize, log.With("component", "shared-tier-report"))
	}
	eng, err := engine.New(engine.Config{
		BlockSize: cfg.BlockSize, NumBlocks: cfg.NumBlocks, MaxRunning: cfg.MaxRunning,
		MaxBatchTokens: cfg.MaxBatchTokens, LongPrefillTokens: cfg.LongPrefillTokens, PrefillOrder: cfg.PrefillOrder, EventBuffer: cfg.EventBuffer,
		Tiers: cfg.tiers(rep), SharedKV: cfg.sharedKV(),
	}, m.exec, log.With("component", "engine"))
	if err != nil {
		return err
	}
	inv := cuda.Open(log)
	unregister, err := metrics.Register(rt.Telemetry.Meter, eng, inv.GPUs, metrics.WithModel(cfg.ModelName))
	if err != nil {
		_ = eng.Close()
		_ = inv.Close()
		return err
	}
	hc, tr, err := disaggHooks(ctx, rt, cfg, eng, log)
	if err != nil {
		_ = unregister()
		_ = eng.Close()
		_ = inv.Close()
		return err
	}
	if rep != nil {
		opts, err := client.Options(rt.Telemetry)
		if err != nil {
			log.Warn("shared tier reports untraced", "err", err)
		}
		go rep.run(ctx, rt.Registry, rt.HTTPClient(), opts...)
	}
	hc.Engine, hc.Model, hc.Tokenizer, hc.TokenizerKind, hc.Logger, hc.Cordon = eng, cfg.ModelName, m.tokenizer, m.tokenizerKind, log, cordoner(rt)
	h := handler.New(hc)
	// The runtime's handler options compress only messages of 4 KiB or
	// more: token messages are tens of bytes, and gzip on each was 30% of a
	// streamed token's CPU.
	rt.Server.Mount(workerv1connect.NewWorkerServiceHandler(h, rt.Server.HandlerOptions()...))
	mi := eng.ModelInfo()
	publish(ctx, rt, cfg, mi, inv, tr)
	if cfg.hasTiers() {
		go publishTierTimes(ctx, eng, rt.Server.PublishMeta, log)
	}

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		run(ctx, eng, h, drainWindow(rt.Server.DrainTimeout()), log, func() {
			_ = unregister()
			_ = inv.Close()
			tr.close(log)
		})
	}()
	// The process waits for that teardown (the transfer agent's close, the
	// arena's release) before it exits, bounded by the drain timeout.
	rt.AfterDrain(func(dctx context.Context) {
		select {
		case <-stopped:
		case <-dctx.Done():
			log.Warn("worker teardown still running at exit")
		}
	})
	log.Info("worker ready", "model", cfg.ModelName, "executor", cfg.Executor, "vocab", mi.VocabSize,
		"context", mi.ContextLen, "kv_blocks", mi.NumBlocks, "block_size", mi.BlockSize)
	return nil
}

// run drives the engine on a context of its own until ctx has ended and
// h has drained (or the window passed), then releases everything.
func run(ctx context.Context, eng *engine.Engine, h *handler.Handler, window time.Duration, log *slog.Logger, release func()) {
	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := eng.Run(engCtx); err != nil {
			log.Error("engine loop", "err", err)
		}
	}()
	<-ctx.Done()
	drain(h, window, log)
	stopEngine()
	<-done
	release()
	if err := eng.Close(); err != nil {
		log.Warn("closing engine", "err", err)
	}
}

// drainWindow leaves the server a margin after the worker's drain, so
// generations the engine ends still reach their clients as errors.
func drainWindow(serverDrain time.Duration) time.Duration {
	return serverDrain - min(serverDrain/10, time.Second)
}

func drain(h *handler.Handler, window time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	if err := h.Drain(ctx); err != nil {
		log.Warn("drain window over; stopping the engine with generations in flight", "inflight", h.Inflight(), "window", window)
	}
}

// publish puts the model, KV geometry and KV transfer endpoints into the
// discovery record and the GPUs into InfoService.
func publish(ctx context.Context, rt *service.Runtime, cfg *Config, mi engine.ModelInfo, inv cuda.Inventory, tr *transfer) {
	gpus, err := inv.GPUs(ctx)
	if err != nil {
		rt.Logger.Warn("listing GPUs", "err", err)
	}
	meta := Meta(cfg.Executor, mi)
	maps.Copy(meta, cuda.Meta(gpus))
	if cfg.HostBlocks > 0 {
		meta[discovery.MetaKVHostBlocks] = strconv.Itoa(cfg.HostBlocks)
	}
	if cfg.DiskBlocks > 0 {
		meta[discovery.MetaKVDiskBlocks] = strconv.Itoa(cfg.DiskBlocks)
	}
	if cfg.S3Bucket != "" {
		meta[discovery.MetaKVSharedBlocks] = strconv.Itoa(cfg.S3Blocks)
	}
	if tr != nil {
		meta[MetaKVTransfer] = tr.agent.Endpoints()
		tr.onChange(func() {
			rt.Logger.Warn("KV transfer endpoints changed (a backend failed); re-publishing them", "endpoints", tr.agent.Endpoints())
			rt.Server.UpdateInstance(func(in *discovery.Instance) { in.Meta[MetaKVTransfer] = tr.agent.Endpoints() })
		})
		if cfg.Disagg != disagg.ModeOff {
			meta[discovery.MetaPrefixPull] = "1"
		}
	}
	rt.Server.UpdateInstance(func(in *discovery.Instance) {
		in.Model = cfg.ModelName
		if in.Meta == nil {
			in.Meta = make(map[string]string, len(meta))
		}
		maps.Copy(in.Meta, meta)
	})
	rt.Server.SetInfo(func(res *meshv1.GetInfoResponse) {
		now, err := inv.GPUs(context.Background())
		if err != nil {
			now = gpus
		}
		res.Gpus = GPUInfo(now)
	})
}

// Meta is the worker's discovery metadata, without GPUs.
func Meta(executor string, mi engine.ModelInfo) map[string]string {
	return map[string]string{
		discovery.MetaKVBlocks:  strconv.Itoa(mi.NumBlocks),
		discovery.MetaBlockSize: strconv.Itoa(mi.BlockSize),
		"context_length":        strconv.Itoa(mi.ContextLen),
		"vocab_size":            strconv.Itoa(mi.VocabSize),
		"executor":              executor,
	}
}

// GPUInfo converts GPUs to their wire form.
func GPUInfo(gpus []cuda.GPU) []*commonv1.GpuInfo {
	out := make([]*commonv1.GpuInfo, 0, len(gpus))
	for _, g := range gpus {
		out = append(out, &commonv1.GpuInfo{
			Index: uint32(max(g.Index, 0)), Name: g.Name, Uuid: g.UUID,
			MemoryTotalBytes: g.MemoryTotalBytes, MemoryUsedBytes: g.MemoryUsedBytes,
			UtilizationPercent: g.UtilizationPercent,
		})
	}
	return out
}

// cordoner publishes a worker's cordon in its discovery record: routers
// send a cordoned worker no new requests while it stays up.
func cordoner(rt *service.Runtime) func(context.Context, bool) error {
	if rt.Registry == nil {
		return nil
	}
	return func(ctx context.Context, on bool) error {
		return rt.Server.PublishMeta(ctx, func(meta map[string]string) {
			if on {
				meta[discovery.MetaCordoned] = "1"
			} else {
				delete(meta, discovery.MetaCordoned)
			}
		})
	}
}
