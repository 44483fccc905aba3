package app

import (
	"context"
	"strconv"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	kvbmv1 "switchyard.dev/gen/switchyard/kvbm/v1"
	"switchyard.dev/libs/mesh/discovery"
)

type controller struct{ reg discovery.Registry }

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

func (c *controller) ListPools(ctx context.Context, req *connect.Request[kvbmv1.ListPoolsRequest]) (*connect.Response[kvbmv1.ListPoolsResponse], error) {
	res := &kvbmv1.ListPoolsResponse{}
	if c.reg == nil {
		return connect.NewResponse(res), nil
	}
	for _, role := range []string{discovery.RolePrefill, discovery.RoleDecode} {
		ins, err := c.reg.Instances(ctx, role)
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, err)
		}
		for _, in := range ins {
			if m := req.Msg.GetModel(); m != "" && in.Model != m {
				continue
			}
			bs, _ := strconv.ParseUint(in.Meta[discovery.MetaBlockSize], 10, 32)
			for _, t := range tierMeta {
				v, ok := in.Meta[t.key]
				if !ok && t.tier != commonv1.StorageTier_STORAGE_TIER_DEVICE {
					continue // the worker has no such tier
				}
				blocks, _ := strconv.ParseUint(v, 10, 64)
				res.Pools = append(res.Pools, &kvbmv1.Pool{
					InstanceId: in.ID, Role: role, Model: in.Model,
					Tier: t.tier, BlockSize: uint32(bs), CapacityBlocks: blocks,
				})
			}
		}
	}
	return connect.NewResponse(res), nil
}
