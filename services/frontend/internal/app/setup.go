package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/frontend/internal/auth"
	"switchyard.dev/services/frontend/internal/catalog"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/httpapi"
	"switchyard.dev/services/frontend/internal/metrics"
	"switchyard.dev/services/frontend/internal/upstream"
)

func setup(ctx context.Context, rt *service.Runtime, f *flags, version string) error {
	if len(f.routers) == 0 && rt.Registry == nil {
		return errNoRouterSource
	}
	opts, err := rt.ClientOptions()
	if err != nil {
		return err
	}
	hc := rt.HTTPClient()
	workers := upstream.NewWorkers(hc, opts...)
	routers := upstream.NewRouters(hc, rt.Logger, f.routers, opts...)
	rt.AfterDrain(func(ctx context.Context) {
		if err := routers.Flush(ctx); err != nil {
			rt.Logger.Warn("load reports to the router not all sent at shutdown", "err", err)
		}
	})
	if len(f.routers) == 0 {
		split, err := canary.NewSplit(f.canaryWeight)
		if err != nil {
			return fmt.Errorf("-canary-weight: %w", err)
		}
		routers.SetSplit(split)
		if err := routers.Watch(ctx, rt.Registry); err != nil {
			return err
		}
		if err := canary.Follow(ctx, rt.Registry, rt.Logger, split); err != nil {
			return err
		}
	}
	cat := catalog.New(catalog.Config{Registry: rt.Registry, Locate: locator(routers), Dialer: workers, Logger: rt.Logger})
	if err := cat.Run(ctx); err != nil {
		return err
	}
	m, err := metrics.New(rt.Telemetry.Registry)
	if err != nil {
		return err
	}
	gen := generate.New(generate.Config{
		Router: routers, Dialer: workers, Logger: rt.Logger, MigrationAttempts: f.migrationAttempts,
		OnMigrate: func(model string) { m.Migrations.WithLabelValues(model).Inc() },
	})
	guard := newGuard(ctx, rt, f)
	traces := f.console.traces()
	api, err := httpapi.New(httpapi.Config{
		Catalog: cat, Generator: gen, Metrics: m, Templates: f.templates, Guard: guard, Logger: rt.Logger, Aliases: f.aliases, Traces: traces,
		MaxBodyBytes: f.maxBodyBytes, RequestTimeout: f.requestTimeout, Version: version,
	})
	if err != nil {
		return err
	}
	for _, p := range httpapi.Patterns {
		rt.Server.Handle(p, api)
	}
	mountConsole(ctx, rt, &f.console, guard, traces, hc, opts)
	rt.Logger.Info("openai api ready", "routers", len(f.routers), "api_keys", len(f.keys), "rate_limit", f.rateLimit,
		"tokens_per_minute", f.tokensPerMinute, "concurrency_limit", f.concurrencyLimit, "limits_redis", f.limitsRedisAddr,
		"migration_attempts", f.migrationAttempts, "chat_template", f.templates.String())
	return nil
}

// locator finds a worker of a model through the router, for catalogs
// without discovery: route a one-token probe, release it at once.
func locator(r *upstream.Routers) catalog.Locator {
	return func(ctx context.Context, model string) (string, error) {
		id := "probe-" + rand.Text()
		routed, err := r.Route(ctx, &routerv1.RouteRequest{RequestId: id, Model: model, TokenIds: []uint32{tokenizer.BOS}})
		if err != nil {
			return "", err
		}
		r.Release(ctx, routed.Replica, id)
		addr := routed.Resp.GetDecode().GetAddress()
		if addr == "" {
			return "", connect.NewError(connect.CodeUnavailable, errors.New("router chose no decode worker"))
		}
		return addr, nil
	}
}

// newGuard is the API key and limits guard, nil when there are neither
// keys nor limits. Keys files are watched for changes; with
// -limits-redis-addr the limits are the fleet's, kept in Redis.
func newGuard(ctx context.Context, rt *service.Runtime, f *flags) *auth.Guard {
	watched := f.keySource.KeysFile != "" || f.keySource.AdminFile != ""
	if len(f.keys) == 0 && !watched && f.rateLimit == 0 && f.tokensPerMinute == 0 && f.concurrencyLimit == 0 {
		return nil
	}
	var lim auth.Limiter
	if f.limitsRedisAddr != "" {
		// Short timeouts: a request waits on its limits' check, and the
		// limiter skips Redis for a second after a failed call.
		c := redis.NewClient(&redis.Options{Addr: f.limitsRedisAddr, DialTimeout: 250 * time.Millisecond,
			ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond, MaxRetries: 1})
		lim = auth.NewRedis(auth.RedisConfig{Client: c, Namespace: f.limitsNamespace, Logger: rt.Logger})
		go func() {
			<-ctx.Done()
			_ = c.Close()
		}()
	}
	g := auth.New(auth.Config{Entries: f.keys, Rate: f.rateLimit, Burst: f.rateBurst, Limiter: lim, Logger: rt.Logger,
		Defaults: auth.Limits{TokensPerMinute: f.tokensPerMinute, Concurrent: f.concurrencyLimit}})
	if watched {
		go g.Watch(ctx, f.keySource, f.keysReload, rt.Logger)
	}
	return g
}
