package rollout

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/planner/internal/observe"
)

// side is n requests with errs failures at a TTFT and an ITL, in the
// frontends' bucket layout.
func side(n, errs int, ttft, itl float64) observe.Side {
	return observe.Side{Generations: float64(n - errs), Errors: float64(errs), TTFT: hist(n, ttft), ITL: hist(n*10, itl)}
}

func hist(n int, v float64) observe.Histogram {
	h := observe.Histogram{}
	for b := 0.0001; b < 100; b *= 2 {
		h.Bounds = append(h.Bounds, b)
	}
	h.Bounds = append(h.Bounds, math.Inf(1))
	h.Counts = make([]float64, len(h.Bounds))
	for i, b := range h.Bounds {
		if v <= b {
			h.Counts[i] = float64(n)
			break
		}
	}
	return h
}

// withSlow moves n of s's TTFT samples to v seconds.
func withSlow(s observe.Side, n int, v float64) observe.Side {
	slow := hist(n, v)
	for i := range s.TTFT.Counts {
		if s.TTFT.Counts[i] > 0 {
			s.TTFT.Counts[i] -= float64(n)
			break
		}
	}
	for i := range s.TTFT.Counts {
		s.TTFT.Counts[i] += slow.Counts[i]
	}
	return s
}

type ender struct {
	mu   sync.Mutex
	ends []string
	err  error
}

func (e *ender) EndRollout(_ context.Context, role, version string, promote bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	e.ends = append(e.ends, map[bool]string{true: "promote ", false: "abort "}[promote]+role+" "+version)
	return nil
}

func interval(canaryVersion string, can, base observe.Side) map[observe.VersionKey]observe.Side {
	return map[observe.VersionKey]observe.Side{
		{Label: observe.LabelWorkerVersion, Version: canaryVersion}: can,
		{Label: observe.LabelWorkerVersion, Version: "1"}:           base,
		{Label: observe.LabelRouterVersion, Version: "9"}:           side(1000, 900, 9, 9), // another role's: ignored
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	good, base := side(40, 0, 0.2, 0.02), side(400, 1, 0.2, 0.02)
	for _, tc := range []struct {
		name      string
		intervals []map[observe.VersionKey]observe.Side
		state     State
		weight    float64
		reason    string
		ends      []string
	}{
		{name: "healthy canary steps up and is promoted",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", good, base), interval("2", good, base), interval("2", good, base)},
			state:     Promoted, weight: 1, reason: "promoted", ends: []string{"promote decode 2"}},
		{name: "one step",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", good, base)},
			state:     Judging, weight: 0.25, reason: "stepped to weight 0.25"},
		{name: "too few requests waits, then sums intervals",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", side(20, 0, 0.2, 0.02), base)},
			state:     Judging, weight: 0.1, reason: "waiting for requests at weight 0.1: canary 20, baseline 400 of 30 each"},
		{name: "two quiet intervals make a verdict",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", side(20, 0, 0.2, 0.02), base), interval("2", side(20, 0, 0.2, 0.02), base)},
			state:     Judging, weight: 0.25},
		{name: "errors abort",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", side(40, 4, 0.2, 0.02), base)},
			state:     Aborted, weight: 0, reason: "error rate 10.0%", ends: []string{"abort decode 2"}},
		{name: "slow first token aborts",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", side(40, 0, 0.9, 0.02), base)},
			state:     Aborted, weight: 0, reason: "TTFT p50", ends: []string{"abort decode 2"}},
		{name: "slow tokens abort",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", side(40, 0, 0.2, 0.08), base)},
			state:     Aborted, weight: 0, reason: "ITL p50", ends: []string{"abort decode 2"}},
		{name: "a difference under the floor passes",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", side(40, 0, 0.0008, 0.0008), side(400, 0, 0.0002, 0.0002))},
			state:     Judging, weight: 0.25},
		{name: "one slow request in forty is chance, not a regression",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", withSlow(side(40, 0, 0.2, 0.02), 1, 5), base)},
			state:     Judging, weight: 0.25, reason: "stepped"},
		{name: "one error in forty is chance, not a regression",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", side(40, 1, 0.2, 0.02), base)},
			state:     Judging, weight: 0.25, reason: "stepped"},
		{name: "a slow tail on many requests aborts",
			intervals: []map[observe.VersionKey]observe.Side{interval("2", withSlow(side(400, 0, 0.2, 0.02), 40, 5), side(400, 0, 0.2, 0.02))},
			state:     Aborted, weight: 0, reason: "TTFT p99", ends: []string{"abort decode 2"}},
		{name: "no canary traffic waits",
			intervals: []map[observe.VersionKey]observe.Side{interval("3", good, base)},
			state:     Judging, weight: 0.1, reason: "canary 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := &ender{}
			c, err := New(DefaultCriteria(), e, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Set(discovery.RoleDecode, "2", 0.1, true); err != nil {
				t.Fatal(err)
			}
			for _, iv := range tc.intervals {
				c.Observe(t.Context(), iv)
			}
			r := c.List()[0]
			if r.State != tc.state || r.Weight != tc.weight || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("state %s weight %v reason %q; want %s, %v, containing %q", r.State, r.Weight, r.Reason, tc.state, tc.weight, tc.reason)
			}
			if strings.Join(e.ends, ";") != strings.Join(tc.ends, ";") {
				t.Errorf("ends %v, want %v", e.ends, tc.ends)
			}
			if got := c.Published()[discovery.RoleDecode]; got.Weight != r.Weight || got.Version != "2" {
				t.Errorf("published %+v, want version 2 at %v", got, r.Weight)
			}
		})
	}
}

// TestEndRetried: an end the deployment refused stays pending and is
// applied at a later interval.
func TestEndRetried(t *testing.T) {
	t.Parallel()
	e := &ender{err: errors.New("nomad unreachable")}
	c, _ := New(DefaultCriteria(), e, nil)
	if _, err := c.Set(discovery.RoleRouter, "5", 0.2, false); err != nil {
		t.Fatal(err)
	}
	r, err := c.End(t.Context(), discovery.RoleRouter, false, "by hand")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != Aborted || !strings.Contains(r.Reason, "not applied yet: nomad unreachable") {
		t.Errorf("after a refused end: %s %q", r.State, r.Reason)
	}
	e.mu.Lock()
	e.err = nil
	e.mu.Unlock()
	c.Observe(t.Context(), nil)
	c.Observe(t.Context(), nil)
	if len(e.ends) != 1 || e.ends[0] != "abort router 5" {
		t.Errorf("ends %v, want one abort", e.ends)
	}
	if _, err := c.End(t.Context(), discovery.RoleRouter, true, "again"); !errors.Is(err, ErrNoRollout) {
		t.Errorf("End of an ended rollout: %v", err)
	}
}

func TestSetRefuses(t *testing.T) {
	t.Parallel()
	c, _ := New(DefaultCriteria(), nil, nil)
	for _, tc := range []struct {
		role, version string
		weight        float64
		judge         bool
		err           string
	}{
		{"frontend", "2", 0.1, false, "role"},
		{"decode", "", 0.1, false, "version"},
		{"decode", "2", 1.5, false, "weight"},
		{"prefill", "2", 0.1, true, "cannot be judged"},
	} {
		if _, err := c.Set(tc.role, tc.version, tc.weight, tc.judge); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Set(%s, %q, %v, %v) = %v, want ErrInvalid containing %q", tc.role, tc.version, tc.weight, tc.judge, err, tc.err)
		}
	}
	if _, err := c.Set("prefill", "2", 0.3, false); err != nil {
		t.Errorf("a held prefill rollout: %v", err)
	}
}

func TestCriteriaValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mut func(*Criteria)
		err string
	}{
		{func(c *Criteria) { c.MinRequests = 0 }, "min requests"},
		{func(c *Criteria) { c.MaxErrorRate = 2 }, "max error rate"},
		{func(c *Criteria) { c.MaxLatencyRatio = 0.5 }, "max latency ratio"},
		{func(c *Criteria) { c.MaxTailRatio = math.NaN() }, "max tail ratio"},
		{func(c *Criteria) { c.LatencyFloor = -time.Second }, "latency floor"},
		{func(c *Criteria) { c.Steps = nil }, "no weight steps"},
		{func(c *Criteria) { c.Steps = []float64{0.5, 0.2} }, "rising"},
		{func(c *Criteria) { c.Steps = []float64{0.5, 1} }, "rising"},
	} {
		c := DefaultCriteria()
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Validate = %v, want one containing %q", err, tc.err)
		}
		if _, err := New(c, nil, nil); err == nil {
			t.Errorf("New accepted criteria Validate refuses (%q)", tc.err)
		}
	}
	if err := DefaultCriteria().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
