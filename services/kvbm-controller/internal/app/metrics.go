package app

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/services/kvbm-controller/internal/catalog"
)

// registerMetrics exports the catalog's fleet view of the shared tier:
// per namespace, blocks and bytes held and the bytes workers moved and the
// time that took;
// for the store, the budget, evictions, failed deletes and listings.
func registerMetrics(mp metric.MeterProvider, cat *catalog.Catalog) (metric.Registration, error) {
	m := mp.Meter("switchyard.dev/services/kvbm-controller")
	var err error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, e := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return g
	}
	counter := func(name, desc string) metric.Int64ObservableCounter {
		c, e := m.Int64ObservableCounter(name, metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	counterBytes := func(name, desc string) metric.Int64ObservableCounter {
		c, e := m.Int64ObservableCounter(name, metric.WithUnit("By"), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	fcounter := func(name, unit, desc string) metric.Float64ObservableCounter {
		c, e := m.Float64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	blocks := gauge("switchyard_kvbm_shared_blocks", "{block}", "blocks the shared tier holds, per namespace and block geometry")
	bytes := gauge("switchyard_kvbm_shared_bytes", "By", "bytes the shared tier holds, per namespace and block geometry")
	capacity := gauge("switchyard_kvbm_shared_capacity_bytes", "By", "the shared tier's byte budget (0: none)")
	// Bandwidth is exported as two counters, bytes moved and the time moving
	// them took, never as a rate: rate(bytes)/rate(seconds) is the
	// bandwidth over whatever window a query asks for.
	writeBytes := counterBytes("switchyard_kvbm_shared_write_bytes", "bytes workers reported offloading into the shared tier")
	readBytes := counterBytes("switchyard_kvbm_shared_read_bytes", "bytes workers reported onboarding out of the shared tier")
	writeTime := fcounter("switchyard_kvbm_shared_write_seconds", "s", "time workers reported spending on offloads into the shared tier")
	readTime := fcounter("switchyard_kvbm_shared_read_seconds", "s", "time workers reported spending on onboarding out of the shared tier")
	evicted := counter("switchyard_kvbm_shared_evicted_blocks", "blocks deleted from the store for the budget or the TTL")
	delFailed := counter("switchyard_kvbm_shared_delete_failures", "deletes of evicted blocks the store refused (retried after the next listing)")
	listings := counter("switchyard_kvbm_shared_listings", "listings of the store")
	listFailed := counter("switchyard_kvbm_shared_listing_failures", "listings of the store that failed")
	if err != nil {
		return nil, fmt.Errorf("kvbm-controller metrics: %w", err)
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, p := range cat.Pools() {
			model, e := s3tier.Model(p.Namespace)
			if e != nil {
				model = p.Namespace
			}
			attrs := metric.WithAttributes(attribute.String("model", model), attribute.String("namespace", p.Namespace),
				attribute.Int("block_size", p.BlockSize), attribute.Int("block_bytes", p.BlockBytes))
			o.ObserveInt64(blocks, p.Blocks, attrs)
			o.ObserveInt64(bytes, p.Bytes, attrs)
			o.ObserveInt64(writeBytes, p.WriteBytes, attrs)
			o.ObserveInt64(readBytes, p.ReadBytes, attrs)
			o.ObserveFloat64(writeTime, p.WriteTime.Seconds(), attrs)
			o.ObserveFloat64(readTime, p.ReadTime.Seconds(), attrs)
		}
		st := cat.Stats()
		o.ObserveInt64(capacity, cat.Capacity())
		o.ObserveInt64(evicted, st.Evicted)
		o.ObserveInt64(delFailed, st.DeleteFailures)
		o.ObserveInt64(listings, st.Listings)
		o.ObserveInt64(listFailed, st.ListingFailures)
		return nil
	}, blocks, bytes, capacity, writeBytes, readBytes, writeTime, readTime, evicted, delFailed, listings, listFailed)
}
