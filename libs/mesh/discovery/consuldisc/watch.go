package consuldisc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"switchyard.dev/libs/mesh/backoff"
	"switchyard.dev/libs/mesh/discovery"
)

// lapseSlack is what the default lapse window (Config.LapseWindow) adds
// to one heartbeat interval (a third of the TTL).
//
// A watch holds on to a listed instance when the agent, not the instance,
// may be why it left: its heartbeat check lapsed ("TTL expired"), or the
// agent's index went back (it restarted, or rebuilt the view it answers
// blocking queries from) and the answer no longer has it. Both happen to
// every instance at once when the agent itself stalls: a frozen VM or
// process, a long GC. On resuming, the agent finds every TTL overdue and
// marks all checks critical, and its blocking queries may answer once
// from an empty view, for the milliseconds until the heartbeats that
// waited on it land; acting on those lists empties every watch of the
// mesh at once. A live instance's heartbeat always follows within one
// interval (a pause long enough to expire a TTL outlasts the interval,
// so each live instance has a heartbeat in flight; a restart that forgot
// it is found by its next heartbeat, which registers it again). The slack
// is room for a loaded machine; a dead instance is listed that much
// longer, next to the TTL for which it is listed anyway.
const lapseSlack = time.Second

// ttlExpired is how Consul's agent begins the output of a TTL check it
// turned critical because no update came in time. An instance that sets
// itself critical (SetHealth, before it drains) sends no output, so the
// two stay apart.
const ttlExpired = "TTL expired"

// entry is one agent service of a role as the catalog has it.
type entry struct {
	in      discovery.Instance
	passing bool
	// lapsed: failing only because its heartbeat check's TTL ran out.
	lapsed bool
}

// entries lists every instance of role in the catalog, passing or not,
// blocking up to wait while the catalog's index is still index.
func (r *Registry) entries(ctx context.Context, role string, index uint64, wait time.Duration) ([]entry, uint64, error) {
	ses, last, err := r.agent.Entries(ctx, r.serviceName(role), index, wait)
	if err != nil {
		return nil, 0, fmt.Errorf("consul health %s: %w", role, err)
	}
	out := make([]entry, 0, len(ses))
	for _, se := range ses {
		in := fromEntry(se.Service)
		in.ID = r.instanceID(in.ID)
		status := se.Checks.AggregatedStatus()
		out = append(out, entry{in: in, passing: status == api.HealthPassing, lapsed: status == api.HealthCritical && onlyLapsed(se.Checks)})
	}
	return out, last, nil
}

// onlyLapsed reports whether every failing check is a heartbeat whose TTL
// ran out: a failing node check or maintenance mode is taken at its word.
func onlyLapsed(checks api.HealthChecks) bool {
	for _, c := range checks {
		if c.Status == api.HealthPassing {
			continue
		}
		if c.Status != api.HealthCritical || !strings.HasPrefix(c.CheckID, checkIDPrefix) || !strings.HasPrefix(c.Output, ttlExpired) {
			return false
		}
	}
	return true
}

// Instances lists the passing instances of role now (no lapse window: it
// has no earlier answer to hold on to).
func (r *Registry) Instances(ctx context.Context, role string) ([]discovery.Instance, error) {
	es, _, err := r.entries(ctx, role, 0, r.cfg.WatchWait)
	if err != nil {
		return nil, err
	}
	var out []discovery.Instance
	for _, e := range es {
		if e.passing {
			out = append(out, e.in)
		}
	}
	discovery.SortInstances(out)
	return out, nil
}

// Watch runs blocking queries until ctx ends. An instance it listed whose
// heartbeat lapses, or that an answer after the agent's index went back
// lacks, stays listed for the lapse window and is dropped only if it has
// not passed again by then; one that is deregistered, set critical by
// itself, or fails any other way is dropped at once.
func (r *Registry) Watch(ctx context.Context, role string) (<-chan []discovery.Instance, error) {
	ch := make(chan []discovery.Instance, 1)
	go func() {
		defer close(ch)
		var (
			index uint64 // of the next query: 0 after a failure
			seen  uint64 // of the last answer
			last  []discovery.Instance
			sent  bool
		)
		hold := newLapses(r.cfg.LapseWindow)
		retry := r.backoff()
		for ctx.Err() == nil {
			wait := r.cfg.WatchWait
			if d, ok := hold.due(time.Now()); ok {
				wait = min(wait, max(d, time.Millisecond))
			}
			es, next, err := r.entries(ctx, role, index, wait)
			if err != nil {
				wait := retry.Next()
				if backoff.LogWorthy(retry.Failures()) {
					r.cfg.Logger.Warn("consul watch failed", "role", role, "failures", retry.Failures(), "retry_in", wait, "err", err)
				}
				index = 0
				backoff.Sleep(ctx, wait)
				continue
			}
			retry.Reset()
			// The index went back: the agent restarted, or rebuilt the
			// view it answers from. Block from the new index, and take
			// what is missing from this answer as not known yet.
			reset := next < seen
			seen = next
			// Never 0 after a success: a query at index 0 does not block,
			// and an agent answering 0 would make this a busy loop.
			// (Index 1 returns at once on any real state.)
			index = max(next, 1)
			ins := hold.filter(time.Now(), es, last, reset)
			if !sent || !discovery.Equal(ins, last) {
				sent, last = true, ins
				discovery.SendLatest(ch, ins)
			}
		}
	}()
	return ch, nil
}

// lapses is a watch's memory of the listed instances it holds on to
// (Watch says which): when each stops being listed unless it passes
// again. It is pure logic, fed the catalog's answers and the time.
type lapses struct {
	window time.Duration
	held   map[string]*held // by instance id
}

type held struct {
	until time.Time
	in    discovery.Instance // as last listed
	// absent: held because an answer after a reset lacked it; it stays
	// listed while absent, until its time.
	absent bool
}

func newLapses(window time.Duration) *lapses {
	return &lapses{window: window, held: map[string]*held{}}
}

// filter returns the instances to list, sorted: the passing ones, and the
// held ones within their window. last is what the watch listed before;
// reset says the agent's index went back before this answer.
func (l *lapses) filter(now time.Time, es []entry, last []discovery.Instance, reset bool) []discovery.Instance {
	listed := make(map[string]discovery.Instance, len(last))
	for _, in := range last {
		listed[in.ID] = in
	}
	present := make(map[string]bool, len(es))
	out := make([]discovery.Instance, 0, len(es)+len(l.held))
	for _, e := range es {
		id := e.in.ID
		present[id] = true
		h := l.held[id]
		switch _, was := listed[id]; {
		case e.passing:
			delete(l.held, id)
			out = append(out, e.in)
		case !e.lapsed:
			delete(l.held, id)
		case h != nil:
			// Kept past its time too, so that a lapse already believed
			// is not held a second time.
			h.absent = false
			if now.Before(h.until) {
				out = append(out, e.in)
			}
		case was && l.window > 0:
			l.held[id] = &held{until: now.Add(l.window), in: e.in}
			out = append(out, e.in)
		}
	}
	if reset && l.window > 0 {
		for id, in := range listed {
			if present[id] {
				continue
			}
			if h := l.held[id]; h != nil {
				h.absent = true
			} else {
				l.held[id] = &held{until: now.Add(l.window), in: in, absent: true}
			}
		}
	}
	for id, h := range l.held {
		switch {
		case present[id]:
		case h.absent && now.Before(h.until):
			out = append(out, h.in)
		default: // deregistered, reaped, or not back in time: gone
			delete(l.held, id)
		}
	}
	discovery.SortInstances(out)
	return out
}

// due returns how long until the next held instance's window ends, if any
// is still held: the watch must look again then even if nothing changes.
func (l *lapses) due(now time.Time) (time.Duration, bool) {
	var first time.Time
	for _, h := range l.held {
		if h.until.After(now) && (first.IsZero() || h.until.Before(first)) {
			first = h.until
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return first.Sub(now), true
}
