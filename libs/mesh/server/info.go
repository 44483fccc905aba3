package server

import (
	"context"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	meshv1 "switchyard.dev/gen/switchyard/mesh/v1"
)

// InfoFunc lets a service add detail (for example its GPUs) to GetInfo.
type InfoFunc func(*meshv1.GetInfoResponse)

type infoService struct{ s *Server }

func (i *infoService) GetInfo(context.Context, *connect.Request[meshv1.GetInfoRequest]) (*connect.Response[meshv1.GetInfoResponse], error) {
	in := i.s.Instance()
	res := &meshv1.GetInfoResponse{
		Role:       in.Role,
		InstanceId: in.ID,
		Version:    in.Version,
		Model:      in.Model,
		Tags:       slices.Clone(in.Tags),
		Meta:       in.Meta,
		StartedAt:  timestamppb.New(i.s.started),
	}
	i.s.mu.Lock()
	info := i.s.cfg.Info
	i.s.mu.Unlock()
	if info != nil {
		info(res)
	}
	return connect.NewResponse(res), nil
}
