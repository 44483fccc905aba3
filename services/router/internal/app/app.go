// Package app wires the router service: flags, the radix index (restored
// from a Redis snapshot when configured), KV event ingestion from the
// workers in discovery, the decision engine behind RouterService, and load
// sharing with peer routers through RouterPeerService.
package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/radix"
	"switchyard.dev/services/router/internal/ingest"
	"switchyard.dev/services/router/internal/peer"
	"switchyard.dev/services/router/internal/policy"
	"switchyard.dev/services/router/internal/route"
	"switchyard.dev/services/router/internal/snapshot"
)

// Main runs the service until ctx ends and returns the exit code.
func Main(ctx context.Context, version string, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return service.Run(ctx, Spec(version), service.Env{Args: args, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}

// Spec describes the router service.
func Spec(version string) service.Spec { return spec(version, nil) }

// stack is a running router's parts, handed to tests.
type stack struct {
	index    *radix.Index
	router   *route.Router
	ingester *ingest.Ingester
	id       string
}

func spec(version string, onSetup func(*stack)) service.Spec {
	f := new(flags)
	return service.Spec{
		Role:          discovery.RoleRouter,
		Version:       version,
		DefaultListen: "127.0.0.1:9000",
		Flags:         func(fs *flag.FlagSet) { f.register(fs) },
		Validate:      f.validate,
		Setup: func(ctx context.Context, rt *service.Runtime) error {
			st, err := setup(ctx, rt, f)
			if err == nil && onSetup != nil {
				onSetup(st)
			}
			return err
		},
	}
}

func setup(ctx context.Context, rt *service.Runtime, f *flags) (*stack, error) {
	log, id := rt.Logger, rt.Server.Instance().ID
	hc := rt.HTTPClient()
	// Peer pushes and KV-event subscriptions are traced and metered like
	// every other service's outgoing calls.
	copts, err := rt.ClientOptions()
	if err != nil {
		return nil, err
	}
	split, err := canary.NewSplit(f.canaryWeight)
	if err != nil {
		return nil, fmt.Errorf("-canary-weight: %w", err)
	}
	index, saver := openIndex(ctx, rt, f)
	var pusher *peer.Pusher
	cfg := route.Config{
		Self: id, Index: index, Mode: f.mode,
		Params:                policy.Params{Weights: f.weights, PrefillLoadScale: f.prefillLoadScale, OwnPrefillWeight: f.ownPrefill, Temperature: f.temperature, PrefixPullWeight: f.prefixPull},
		DisaggThresholdTokens: f.disaggThreshold, DefaultBlockSize: f.blockSize, ExpectedOutputTokens: f.expectedOutput,
		PrefillBlockTime: f.prefillBlockTime, LoadTTL: f.loadTTL, FixedTierWeights: f.fixedWeights,
		Approx: f.approx, ApproxTTL: f.approxTTL, ApproxMaxBlocks: f.approxMaxBlocks,
		Meter: rt.Telemetry.Meter.Meter("switchyard.dev/services/router"), Logger: log, Split: split,
	}
	if f.sharePeers && rt.Registry != nil {
		pusher = peer.NewPusher(id, hc, log, copts...)
		cfg.Publish = pusher.Publish
	}
	router, err := route.New(cfg)
	if err != nil {
		return nil, err
	}
	opts := rt.Server.HandlerOptions()
	rt.Server.Mount(routerv1connect.NewRouterServiceHandler(router, opts...))
	rt.Server.Mount(routerv1connect.NewRouterPeerServiceHandler(&peer.Handler{Self: id, Apply: router.ApplyPeer}, opts...))

	icfg := ingest.Config{Index: index, HTTP: hc, ClientOptions: copts, Logger: log, OnLeave: router.ClearApprox}
	if f.approx == "auto" {
		icfg.OnNoEvents, icfg.OnEvents = router.SetApprox, router.ClearApprox
	}
	in := ingest.New(icfg)
	if rt.Registry != nil {
		if err := watchWorkers(ctx, rt.Registry, log, router, in, f.approx == "all"); err != nil {
			return nil, err
		}
		if err := canary.Follow(ctx, rt.Registry, log, split); err != nil {
			return nil, err
		}
		if pusher != nil {
			if err := pusher.Watch(ctx, rt.Registry); err != nil {
				return nil, err
			}
			go pusher.Run(ctx)
		}
	}
	go router.Run(ctx, 50*time.Millisecond)
	if saver != nil {
		saver.Source = index.Snapshot
		go saver.Run(ctx)
		// The last save after the drain, waited for: ctx has ended by then
		// (so has the ingestion that changes the index).
		rt.AfterDrain(func(dctx context.Context) {
			saver.Final(dctx)
			if c, ok := saver.Store.(io.Closer); ok {
				_ = c.Close()
			}
		})
	}
	return &stack{index: index, router: router, ingester: in, id: id}, nil
}

// openIndex restores the index from Redis when configured. An unreachable
// Redis or a bad snapshot is logged and routing starts from an empty index
// (the workers' dumps rebuild it); the saver keeps retrying.
func openIndex(ctx context.Context, rt *service.Runtime, f *flags) (*radix.Index, *snapshot.Saver) {
	if f.redisAddr == "" {
		return radix.New(), nil
	}
	store := snapshot.NewRedis(f.redisAddr)
	key := "switchyard:router:" + f.namespace + ":index"
	saver := &snapshot.Saver{Store: store, Key: key, Interval: f.snapshotInterval, Logger: rt.Logger}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	data, err := store.Load(lctx, key)
	switch {
	case err != nil:
		rt.Logger.Warn("index snapshot not loaded; starting empty, snapshots will retry", "redis", f.redisAddr, "err", err)
	case data == nil:
		rt.Logger.Info("no index snapshot yet", "key", key)
	default:
		ix, err := radix.Restore(data)
		if err != nil {
			rt.Logger.Warn("index snapshot unusable; starting empty", "key", key, "err", err)
			break
		}
		rt.Logger.Info("index restored from snapshot", "key", key, "workers", len(ix.Workers()), "bytes", len(data))
		return ix, saver
	}
	return radix.New(), saver
}

// watchWorkers follows the decode and prefill roles, and the
// kvbm-controllers for the shared tier. The ingester is synced only once
// every role has reported, so workers restored from a snapshot are not
// dropped just because another role was not seen yet.
func watchWorkers(ctx context.Context, reg discovery.Registry, log *slog.Logger, router *route.Router, in *ingest.Ingester, approxAll bool) error {
	roles := []string{discovery.RoleDecode, discovery.RolePrefill, discovery.RoleKVBMController}
	return discovery.WatchRoles(ctx, reg, log, roles, func(latest map[string][]discovery.Instance) {
		dec, pre := latest[discovery.RoleDecode], latest[discovery.RolePrefill]
		router.SetWorkers(dec, pre)
		if len(latest) == len(roles) { // WatchRoles never calls after ctx ends
			in.Sync(ctx, followed(dec, pre, latest[discovery.RoleKVBMController], router.SharedNamespaces(), approxAll))
		}
	})
}

// followed lists what the index follows: every worker, and for every
// model, at the block size its pool routes with, the shared tier, from
// the kvbm-controller that owns its catalog (a second one stands by,
// and the router turns to it when the first leaves).
func followed(dec, pre, ctrl []discovery.Instance, shared []route.SharedNamespace, approxAll bool) []ingest.Worker {
	var out []ingest.Worker
	for _, ins := range [][]discovery.Instance{dec, pre} {
		for _, in := range ins {
			out = append(out, ingest.Worker{ID: in.ID, URL: in.URL(), Approx: approxAll})
		}
	}
	owner, ok := discovery.SharedTierController(ctrl)
	if !ok {
		return out
	}
	for _, ns := range shared {
		out = append(out, ingest.Worker{ID: route.SharedHolder(ns.Model, ns.BlockSize), URL: owner.URL(),
			SharedModel: ns.Model, SharedBlockSize: uint32(ns.BlockSize)})
	}
	return out
}
