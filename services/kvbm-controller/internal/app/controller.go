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
			blocks, _ := strconv.ParseUint(in.Meta[discovery.MetaKVBlocks], 10, 64)
			bs, _ := strconv.ParseUint(in.Meta[discovery.MetaBlockSize], 10, 32)
			res.Pools = append(res.Pools, &kvbmv1.Pool{
				InstanceId: in.ID, Role: role, Model: in.Model,
				Tier: commonv1.StorageTier_STORAGE_TIER_DEVICE, BlockSize: uint32(bs), CapacityBlocks: blocks,
			})
		}
	}
	return connect.NewResponse(res), nil
}
