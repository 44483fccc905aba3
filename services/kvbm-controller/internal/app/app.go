// Package app wires the KV block manager controller: the fleet's
// inventory of KV storage (every worker publishes its tiers' capacity in
// discovery, and ListPools reports it per worker and tier), and, with a
// shared object store configured, the catalog of that store (package
// catalog): what it holds, its eviction, and the one event stream of the
// shared tier that routers index.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"switchyard.dev/gen/switchyard/kvbm/v1/kvbmv1connect"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/kvbm-controller/internal/catalog"
)

// flags are the controller's own settings.
type flags struct {
	s3Endpoint, s3Bucket string
	capacity             byteSize
	ttl, reconcile       time.Duration
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.s3Endpoint, "s3-endpoint", "", "URL of the shared tier's S3-compatible store (empty: AWS); credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the SDK's chain")
	fs.StringVar(&f.s3Bucket, "s3-bucket", "", "bucket of the shared KV tier; empty: no catalog (the workers' -kv-s3-bucket)")
	fs.Var(&f.capacity, "s3-capacity", "byte budget of the shared tier (e.g. 500GiB): past it the least recently used blocks are deleted; 0: none")
	fs.DurationVar(&f.ttl, "s3-ttl", 0, "delete shared blocks unused for longer than this; 0: never")
	fs.DurationVar(&f.reconcile, "s3-reconcile", time.Minute, "how often the catalog lists the store to repair what reports missed")
}

func (f *flags) validate() error {
	switch {
	case f.ttl < 0:
		return fmt.Errorf("-s3-ttl %v: want >= 0", f.ttl)
	case f.reconcile <= 0:
		return fmt.Errorf("-s3-reconcile %v: want > 0", f.reconcile)
	case f.s3Bucket == "" && (f.capacity > 0 || f.ttl > 0):
		return errors.New("-s3-capacity and -s3-ttl need -s3-bucket")
	}
	return nil
}

// Spec describes the kvbm-controller service.
func Spec(version string) service.Spec {
	f := &flags{}
	return service.Spec{
		Role:          discovery.RoleKVBMController,
		Version:       version,
		DefaultListen: "127.0.0.1:9300",
		Flags:         f.register,
		Validate:      f.validate,
		Setup: func(ctx context.Context, rt *service.Runtime) error {
			c := &controller{reg: rt.Registry, id: rt.Server.Instance().ID, stopped: ctx.Done()}
			if f.s3Bucket != "" {
				cat, err := openCatalog(ctx, rt, f)
				if err != nil {
					return err
				}
				c.cat = cat
				reg, err := registerMetrics(rt.Telemetry.Meter, cat)
				if err != nil {
					return err
				}
				context.AfterFunc(ctx, func() { _ = reg.Unregister() })
				go cat.Run(ctx)
				if rt.Registry != nil {
					if err := watchOwner(ctx, rt, cat); err != nil {
						return err
					}
				}
				rt.Server.UpdateInstance(func(in *discovery.Instance) {
					if in.Meta == nil {
						in.Meta = map[string]string{}
					}
					in.Meta[discovery.MetaSharedTier] = "1"
				})
			}
			rt.Server.Mount(kvbmv1connect.NewKvbmControllerServiceHandler(c, rt.Server.HandlerOptions()...))
			return nil
		},
	}
}

// watchOwner keeps the catalog a standby while another kvbm-controller
// owns the shared tier (discovery.SharedTierController: the one routers
// follow and workers report to). Until this one is listed it stands by.
func watchOwner(ctx context.Context, rt *service.Runtime, cat *catalog.Catalog) error {
	self := rt.Server.Instance().ID
	cat.SetStandby(true)
	return discovery.WatchRole(ctx, rt.Registry, rt.Logger, discovery.RoleKVBMController, func(ins []discovery.Instance) {
		owner, ok := discovery.SharedTierController(ins)
		cat.SetStandby(!ok || owner.ID != self)
	})
}

// openCatalog checks the bucket and lists it, so that a wrong endpoint,
// bucket or credentials fail start-up in one line naming the setting.
func openCatalog(ctx context.Context, rt *service.Runtime, f *flags) (*catalog.Catalog, error) {
	client, err := s3tier.NewClient(ctx, s3tier.ClientConfig{Endpoint: f.s3Endpoint})
	if err != nil {
		return nil, err
	}
	store := &catalog.S3{Client: client, Bucket: f.s3Bucket}
	if err := store.Check(ctx); err != nil {
		return nil, fmt.Errorf("kvbm-controller: -s3-bucket: %w", s3tier.Explain(f.s3Bucket, f.s3Endpoint, err))
	}
	cat := catalog.New(catalog.Config{Store: store, CapacityBytes: int64(f.capacity), TTL: f.ttl, Reconcile: f.reconcile, Logger: rt.Logger})
	if err := cat.Reconcile(ctx); err != nil {
		return nil, fmt.Errorf("kvbm-controller: -s3-bucket %q: %w", f.s3Bucket, err)
	}
	st := cat.Stats()
	rt.Logger.Info("shared tier catalog loaded", "bucket", f.s3Bucket, "objects", st.Objects, "bytes", st.Bytes, "capacity", f.capacity.String(), "ttl", f.ttl)
	return cat, nil
}
