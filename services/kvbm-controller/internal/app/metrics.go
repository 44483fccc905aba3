package app

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"switchyard.dev/services/kvbm-controller/internal/catalog"
)

// registerMetrics exports the catalog's fleet view of the shared tier:
// per namespace, blocks and bytes held and the rates workers measured;
// for the store, the budget, evictions, failed deletes and listings.
func registerMetrics(mp metric.MeterProvider, cat *catalog.Catalog) (metric.Registration, error) {
	m := mp.Meter("switchyard.dev/services/kvbm-controller")
	var err error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, e := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return g
	}
	fgauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, e := m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return g
	}
	counter := func(name, desc string) metric.Int64ObservableCounter {
		c, e := m.Int64ObservableCounter(name, metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	blocks := gauge("switchyard_kvbm_shared_blocks", "{block}", "blocks the shared tier holds, per namespace and block geometry")
	bytes := gauge("switchyard_kvbm_shared_bytes", "By", "bytes the shared tier holds, per namespace and block geometry")
	capacity := gauge("switchyard_kvbm_shared_capacity_bytes", "By", "the shared tier's byte budget (0: none)")
	writeRate := fgauge("switchyard_kvbm_shared_write_bytes_per_second", "By/s", "offload rate into the shared tier that workers measured")
	readRate := fgauge("switchyard_kvbm_shared_read_bytes_per_second", "By/s", "onboarding rate out of the shared tier that workers measured")
	evicted := counter("switchyard_kvbm_shared_evicted_blocks", "blocks deleted from the store for the budget or the TTL")
	delFailed := counter("switchyard_kvbm_shared_delete_failures", "deletes of evicted blocks the store refused (retried after the next listing)")
	listings := counter("switchyard_kvbm_shared_listings", "listings of the store")
	listFailed := counter("switchyard_kvbm_shared_listing_failures", "listings of the store that failed")
	if err != nil {
		return nil, fmt.Errorf("kvbm-controller metrics: %w", err)
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, p := range cat.Pools() {
			attrs := metric.WithAttributes(attribute.String("namespace", p.Namespace), attribute.Int("block_size", p.BlockSize), attribute.Int("block_bytes", p.BlockBytes))
			o.ObserveInt64(blocks, p.Blocks, attrs)
			o.ObserveInt64(bytes, p.Bytes, attrs)
			o.ObserveFloat64(writeRate, p.WriteBytesPerSecond, attrs)
			o.ObserveFloat64(readRate, p.ReadBytesPerSecond, attrs)
		}
		st := cat.Stats()
		o.ObserveInt64(capacity, cat.Capacity())
		o.ObserveInt64(evicted, st.Evicted)
		o.ObserveInt64(delFailed, st.DeleteFailures)
		o.ObserveInt64(listings, st.Listings)
		o.ObserveInt64(listFailed, st.ListingFailures)
		return nil
	}, blocks, bytes, capacity, writeRate, readRate, evicted, delFailed, listings, listFailed)
}
