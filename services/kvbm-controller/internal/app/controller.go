package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	kvbmv1 "switchyard.dev/gen/switchyard/kvbm/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/kvbm-controller/internal/catalog"
)

type controller struct {
	reg     discovery.Registry
	id      string
	cat     *catalog.Catalog // nil: no shared tier configured
	stopped <-chan struct{}  // closed when the service shuts down
}

// tierMeta names the discovery meta key of each tier's capacity, fastest
// tier first: a worker's pools are listed in this order.
var tierMeta = []struct {
	tier commonv1.StorageTier
	key  string
}{
	{commonv1.StorageTier_STORAGE_TIER_DEVICE, discovery.MetaKVBlocks},
	{commonv1.StorageTier_STORAGE_TIER_HOST, discovery.MetaKVHostBlocks},
	{commonv1.StorageTier_STORAGE_TIER_DISK, discovery.MetaKVDiskBlocks},
}

// ListPools lists each worker's tiers from discovery, then the shared
// tier's namespaces from the catalog.
func (c *controller) ListPools(ctx context.Context, req *connect.Request[kvbmv1.ListPoolsRequest]) (*connect.Response[kvbmv1.ListPoolsResponse], error) {
	res := &kvbmv1.ListPoolsResponse{}
	model := req.Msg.GetModel()
	if c.reg != nil {
		for _, role := range []string{discovery.RolePrefill, discovery.RoleDecode} {
			ins, err := c.reg.Instances(ctx, role)
			if err != nil {
				return nil, connect.NewError(connect.CodeUnavailable, err)
			}
			for _, in := range ins {
				if model != "" && in.Model != model {
					continue
				}
				res.Pools = append(res.Pools, workerPools(in, role)...)
			}
		}
	}
	if c.cat != nil {
		for _, p := range c.cat.Pools() {
			m, err := s3tier.Model(p.Namespace)
			if err != nil || (model != "" && m != model) {
				continue
			}
			res.Pools = append(res.Pools, &kvbmv1.Pool{
				InstanceId: c.id, Role: discovery.RoleKVBMController, Model: m,
				Tier: commonv1.StorageTier_STORAGE_TIER_EXTERNAL, BlockSize: uint32(p.BlockSize),
				UsedBlocks: uint64(max(p.Blocks, 0)), UsedBytes: uint64(max(p.Bytes, 0)), CapacityBytes: uint64(c.cat.Capacity()),
				WriteBytesPerSecond: p.WriteBytesPerSecond, ReadBytesPerSecond: p.ReadBytesPerSecond,
				BlockLoadNanos: uint64(p.BlockLoadNanos),
			})
		}
	}
	return connect.NewResponse(res), nil
}

func workerPools(in discovery.Instance, role string) []*kvbmv1.Pool {
	var out []*kvbmv1.Pool
	bs, _ := strconv.ParseUint(in.Meta[discovery.MetaBlockSize], 10, 32)
	for _, t := range tierMeta {
		v, ok := in.Meta[t.key]
		if !ok && t.tier != commonv1.StorageTier_STORAGE_TIER_DEVICE {
			continue // the worker has no such tier
		}
		blocks, _ := strconv.ParseUint(v, 10, 64)
		out = append(out, &kvbmv1.Pool{
			InstanceId: in.ID, Role: role, Model: in.Model,
			Tier: t.tier, BlockSize: uint32(bs), CapacityBlocks: blocks,
		})
	}
	return out
}

// maxReportBlocks bounds one report: a worker sends its news every
// fraction of a second, far below this.
const maxReportBlocks = 1 << 16

var errNoShared = errors.New("no shared tier: the kvbm-controller runs without -s3-bucket")

// ReportSharedBlocks applies a worker's report to the catalog.
func (c *controller) ReportSharedBlocks(ctx context.Context, req *connect.Request[kvbmv1.ReportSharedBlocksRequest]) (*connect.Response[kvbmv1.ReportSharedBlocksResponse], error) {
	if c.cat == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errNoShared)
	}
	m := req.Msg
	ns := m.GetNamespace()
	if err := checkNamespace(ns.GetModel(), ns.GetBlockSize()); err != nil {
		return nil, err
	}
	if ns.GetBlockBytes() == 0 || ns.GetBlockBytes() > 1<<40 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("namespace.block_bytes %d: want 1 to 2^40", ns.GetBlockBytes()))
	}
	if n := len(m.GetWritten()) + len(m.GetRead()) + len(m.GetGone()); n > maxReportBlocks {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("report names %d blocks: at most %d a report", n, maxReportBlocks))
	}
	const maxTotal = 1 << 62
	if m.GetWriteBytes() > maxTotal || m.GetReadBytes() > maxTotal || m.GetWriteNanos() > maxTotal || m.GetReadNanos() > maxTotal {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("transfer totals out of range"))
	}
	r := catalog.Report{
		Namespace: s3tier.Namespace(ns.GetModel()), BlockSize: int(ns.GetBlockSize()), BlockBytes: int(ns.GetBlockBytes()),
		Read: m.GetRead(), Gone: m.GetGone(),
		WriteBytes: int64(m.GetWriteBytes()), ReadBytes: int64(m.GetReadBytes()),
		WriteTime: time.Duration(m.GetWriteNanos()), ReadTime: time.Duration(m.GetReadNanos()),
	}
	for _, w := range m.GetWritten() {
		r.Written = append(r.Written, catalog.Written{Hash: w.GetHash(), Bytes: int64(min(w.GetBytes(), maxTotal))})
	}
	if err := c.cat.Apply(r); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return connect.NewResponse(&kvbmv1.ReportSharedBlocksResponse{}), nil
}

func checkNamespace(model string, blockSize uint32) error {
	switch {
	case model == "":
		return connect.NewError(connect.CodeInvalidArgument, errors.New("model is empty"))
	case len(model) > 1024:
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("model name of %d bytes: at most 1024", len(model)))
	case blockSize == 0 || blockSize > 1<<20:
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("block_size %d: want 1 to 2^20", blockSize))
	}
	return nil
}

// dumpChunk bounds the events of one dump message.
const dumpChunk = 1024

// SubscribeSharedEvents streams one namespace of the catalog, as
// WorkerService.SubscribeKvEvents streams a worker's cache: with dump set,
// the blocks held now (dump batches numbered with the sequence they
// reflect), then the batches after it; otherwise the batches after
// after_sequence. A position not buffered, or ahead of the newest batch
// (a catalog restarted since), is OutOfRange: resubscribe with a dump.
func (c *controller) SubscribeSharedEvents(ctx context.Context, req *connect.Request[kvbmv1.SubscribeSharedEventsRequest], out *connect.ServerStream[kvbmv1.SubscribeSharedEventsResponse]) error {
	if c.cat == nil {
		return connect.NewError(connect.CodeFailedPrecondition, errNoShared)
	}
	if err := checkNamespace(req.Msg.GetModel(), req.Msg.GetBlockSize()); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	k := catalog.Stream{Namespace: s3tier.Namespace(req.Msg.GetModel()), BlockSize: int(req.Msg.GetBlockSize())}
	after := req.Msg.GetAfterSequence()
	if req.Msg.GetDump() {
		hashes, seq := c.cat.Dump(k)
		for first := true; first || len(hashes) > 0; first = false {
			n := min(len(hashes), dumpChunk)
			msg := &workerv1.SubscribeKvEventsResponse{Sequence: seq, Dump: true, DumpComplete: n == len(hashes)}
			if n > 0 {
				msg.Events = []*workerv1.KvEvent{stored(hashes[:n])}
			}
			if err := out.Send(&kvbmv1.SubscribeSharedEventsResponse{Batch: msg}); err != nil {
				return err
			}
			hashes = hashes[n:]
		}
		after = seq
	}
	sub, last := c.cat.Subscribe(k, after)
	if after > last {
		return connect.NewError(connect.CodeOutOfRange, fmt.Errorf("after_sequence %d is ahead of the catalog's latest batch %d (did it restart?); resubscribe with dump=true", after, last))
	}
	for {
		b, err := sub.Next(ctx)
		switch {
		case errors.Is(err, kvevent.ErrGap):
			return connect.NewError(connect.CodeOutOfRange, fmt.Errorf("%w; resubscribe with dump=true", err))
		case err != nil && isClosed(c.stopped):
			return connect.NewError(connect.CodeUnavailable, errors.New("kvbm-controller shutting down"))
		case errors.Is(err, context.DeadlineExceeded):
			return connect.NewError(connect.CodeDeadlineExceeded, err)
		case err != nil:
			return connect.NewError(connect.CodeCanceled, err)
		}
		msg := &workerv1.SubscribeKvEventsResponse{Sequence: b.Seq, Events: make([]*workerv1.KvEvent, 0, len(b.Events))}
		for _, e := range b.Events {
			switch e.Kind {
			case kvevent.Stored:
				msg.Events = append(msg.Events, stored(e.BlockHashes))
			case kvevent.Removed:
				msg.Events = append(msg.Events, &workerv1.KvEvent{Event: &workerv1.KvEvent_Removed{Removed: &workerv1.KvBlocksRemoved{
					BlockHashes: e.BlockHashes, Tier: commonv1.StorageTier_STORAGE_TIER_EXTERNAL}}})
			}
		}
		if err := out.Send(&kvbmv1.SubscribeSharedEventsResponse{Batch: msg}); err != nil {
			return err
		}
	}
}

// stored is one Stored event of shared blocks, sent without a parent:
// object keys carry none, and the router keys blocks by hash alone.
func stored(hashes []uint64) *workerv1.KvEvent {
	return &workerv1.KvEvent{Event: &workerv1.KvEvent_Stored{Stored: &workerv1.KvBlocksStored{
		BlockHashes: hashes, Tier: commonv1.StorageTier_STORAGE_TIER_EXTERNAL}}}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
