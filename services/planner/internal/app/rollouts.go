package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"

	"switchyard.dev/services/planner/internal/actuate"
	"switchyard.dev/services/planner/internal/observe"
	"switchyard.dev/services/planner/internal/rollout"
)

// rollouts is the planner's part in canary rollouts: the leader judges
// them (package rollout) and publishes their weights in its discovery
// record, which frontends and routers split traffic by.
type rollouts struct {
	ctl *rollout.Controller
	// seen follows what the leading planner publishes, so a planner that
	// takes the lead carries on its rollouts instead of dropping their
	// canaries' weights.
	seen *canary.Split
	// publish sets this planner's discovery.MetaRollouts to v, or, with
	// !ok, removes it.
	publish func(ctx context.Context, v string, ok bool) error
	log     *slog.Logger

	published *string // what this planner last published; nil: nothing
}

// lead runs as the leader's part of a planning step: judge what the
// frontends saw, then publish the weights.
func (r *rollouts) lead(ctx context.Context, fresh bool, versions map[observe.VersionKey]observe.Side) {
	if fresh && len(r.ctl.List()) == 0 {
		for role, ro := range r.seen.Rollouts() {
			if _, err := r.ctl.Set(role, ro.Version, ro.Weight, false); err != nil {
				r.log.Warn("previous leader's rollout not adopted", "role", role, "err", err)
				continue
			}
			r.log.Info("adopted the previous leader's rollout, held at its weight", "role", role, "version", ro.Version, "weight", ro.Weight)
		}
	}
	r.ctl.Observe(ctx, versions)
	r.sync(ctx)
}

// sync publishes the controller's weights if they changed.
func (r *rollouts) sync(ctx context.Context) {
	v := r.ctl.Published().String()
	if r.published != nil && v == *r.published {
		return
	}
	if err := r.publish(ctx, v, true); err != nil {
		r.log.Warn("rollouts not published; retrying next interval", "err", err)
		return
	}
	r.published = &v
}

// standby withdraws what this planner published as the leader: callers
// follow the first planner that publishes, which must be the leader.
func (r *rollouts) standby(ctx context.Context) {
	if r.published == nil {
		return
	}
	if err := r.publish(ctx, "", false); err != nil {
		r.log.Warn("stale rollouts not withdrawn; retrying next interval", "err", err)
		return
	}
	r.published = nil
}

// GetRollouts implements PlannerServiceHandler.
func (p *planner) GetRollouts(context.Context, *connect.Request[plannerv1.GetRolloutsRequest]) (*connect.Response[plannerv1.GetRolloutsResponse], error) {
	p.mu.Lock()
	leading := p.isLeader
	p.mu.Unlock()
	res := &plannerv1.GetRolloutsResponse{Leader: leading}
	if p.ro == nil {
		return connect.NewResponse(res), nil
	}
	for _, r := range p.ro.ctl.List() {
		res.Rollouts = append(res.Rollouts, rolloutPB(r))
	}
	return connect.NewResponse(res), nil
}

// SetRollout implements PlannerServiceHandler.
func (p *planner) SetRollout(ctx context.Context, req *connect.Request[plannerv1.SetRolloutRequest]) (*connect.Response[plannerv1.SetRolloutResponse], error) {
	if err := p.mustLead(); err != nil {
		return nil, err
	}
	m := req.Msg
	r, err := p.ro.ctl.Set(m.GetRole(), m.GetVersion(), m.GetWeight(), m.GetJudge())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	p.ro.sync(ctx)
	return connect.NewResponse(&plannerv1.SetRolloutResponse{Rollout: rolloutPB(r)}), nil
}

// EndRollout implements PlannerServiceHandler.
func (p *planner) EndRollout(ctx context.Context, req *connect.Request[plannerv1.EndRolloutRequest]) (*connect.Response[plannerv1.EndRolloutResponse], error) {
	if err := p.mustLead(); err != nil {
		return nil, err
	}
	reason := req.Msg.GetReason()
	if reason == "" {
		reason = "by an operator"
	}
	if len(reason) > 256 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("reason is longer than 256 bytes"))
	}
	r, err := p.ro.ctl.End(ctx, req.Msg.GetRole(), req.Msg.GetPromote(), reason)
	if err != nil {
		return nil, connect.NewError(connect.CodeNotFound, err)
	}
	p.ro.sync(ctx)
	return connect.NewResponse(&plannerv1.EndRolloutResponse{Rollout: rolloutPB(r)}), nil
}

func (p *planner) mustLead() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ro == nil {
		return connect.NewError(connect.CodeUnavailable, errors.New("rollouts are not set up"))
	}
	if !p.isLeader {
		return connect.NewError(connect.CodeFailedPrecondition, errors.New("this planner is a standby; the leading planner runs rollouts"))
	}
	return nil
}

func rolloutPB(r rollout.Rollout) *plannerv1.Rollout {
	out := &plannerv1.Rollout{Role: r.Role, Version: r.Version, Weight: r.Weight, Judge: r.Judge, State: string(r.State), Reason: r.Reason,
		Canary: sidePB(r.Canary), Baseline: sidePB(r.Baseline)}
	if !r.Started.IsZero() {
		out.StartedAt = timestamppb.New(r.Started)
	}
	if !r.Changed.IsZero() {
		out.ChangedAt = timestamppb.New(r.Changed)
	}
	return out
}

func sidePB(s rollout.Stats) *plannerv1.RolloutSide {
	return &plannerv1.RolloutSide{Requests: s.Requests, Errors: s.Errors, TtftP50Seconds: s.TTFTP50, TtftP99Seconds: s.TTFTP99,
		ItlP50Seconds: s.ITLP50, ItlP99Seconds: s.ITLP99}
}

// ender ends rollouts on the deployment: Nomad promotes or fails the
// role's deployment; the local supervisor, which runs one command per
// pool and so cannot swap a pool's binary, removes an aborted canary's
// instances and leaves a promotion to the operator who restarts the pool
// with the new build (the canary meanwhile takes all traffic).
type ender struct {
	nomad *actuate.Nomad
	sup   *actuate.Supervisor
	reg   discovery.Registry
}

func (e ender) EndRollout(ctx context.Context, role, version string, promote bool) error {
	switch {
	case e.nomad != nil:
		return e.nomad.EndDeployment(ctx, role, promote)
	case e.sup != nil && !promote && e.reg != nil:
		ins, err := e.reg.Instances(ctx, role)
		if err != nil {
			return fmt.Errorf("list %s instances: %w", role, err)
		}
		var errs []error
		for _, in := range ins {
			if in.Version == version {
				errs = append(errs, e.sup.Remove(ctx, role, in.ID))
			}
		}
		return errors.Join(errs...)
	}
	return nil
}

// stepsFlag is -rollout-steps: comma-separated weights.
type stepsFlag struct{ v *[]float64 }

func (s stepsFlag) String() string {
	if s.v == nil {
		return ""
	}
	parts := make([]string, len(*s.v))
	for i, w := range *s.v {
		parts[i] = strconv.FormatFloat(w, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (s stepsFlag) Set(v string) error {
	var out []float64
	for p := range strings.SplitSeq(v, ",") {
		w, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return fmt.Errorf("weight %q: %w", p, err)
		}
		out = append(out, w)
	}
	*s.v = out
	return nil
}
