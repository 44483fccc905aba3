package supervise

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	supervisorv1 "switchyard.dev/gen/switchyard/supervisor/v1"
	"switchyard.dev/gen/switchyard/supervisor/v1/supervisorv1connect"
)

// Handler serves the supervisor as the Connect SupervisorService.
type Handler struct{ sv *Supervisor }

var _ supervisorv1connect.SupervisorServiceHandler = Handler{}

// NewHandler returns sv's API.
func NewHandler(sv *Supervisor) Handler { return Handler{sv: sv} }

// ListInstances implements SupervisorServiceHandler.
func (h Handler) ListInstances(_ context.Context, req *connect.Request[supervisorv1.ListInstancesRequest]) (*connect.Response[supervisorv1.ListInstancesResponse], error) {
	res := h.sv.List(req.Msg.GetPool())
	if req.Msg.GetPool() != "" && len(res.Pools) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, ErrUnknownPool)
	}
	return connect.NewResponse(res), nil
}

// maxAdd bounds one AddInstances call; the pool's max bounds them all.
const maxAdd = 64

// AddInstances implements SupervisorServiceHandler.
func (h Handler) AddInstances(_ context.Context, req *connect.Request[supervisorv1.AddInstancesRequest]) (*connect.Response[supervisorv1.AddInstancesResponse], error) {
	n := req.Msg.GetCount()
	if n == 0 || n > maxAdd {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("count: want 1 to 64"))
	}
	ins, err := h.sv.Add(req.Msg.GetPool(), int(n))
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&supervisorv1.AddInstancesResponse{Instances: ins}), nil
}

// RemoveInstance implements SupervisorServiceHandler.
func (h Handler) RemoveInstance(_ context.Context, req *connect.Request[supervisorv1.RemoveInstanceRequest]) (*connect.Response[supervisorv1.RemoveInstanceResponse], error) {
	in, err := h.sv.Remove(req.Msg.GetPool(), req.Msg.GetId())
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&supervisorv1.RemoveInstanceResponse{Instance: in}), nil
}

func connectError(err error) error {
	switch {
	case errors.Is(err, ErrUnknownPool), errors.Is(err, ErrNoInstance):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, ErrNotScalable), errors.Is(err, ErrBounds):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, ErrStopping):
		return connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}
