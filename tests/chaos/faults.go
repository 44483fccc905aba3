package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Fault is one thing going wrong for a while, then put right.
type Fault struct {
	Name      string
	Mechanism string // how it is injected, for the report
	// For is how long the fault lasts before Recover.
	For    time.Duration
	Inject func(context.Context, *Stack) error
	// Recover ends the fault; it may return a note for the report.
	Recover func(context.Context, *Stack) (string, error)
	// Frontend marks the loss of a frontend: the requests it held are
	// broken, and the client's retries on the other frontend must serve
	// them.
	Frontend bool
}

// killFault is a SIGKILL of the process pick returns, restarted with the
// same arguments and address after d.
func killFault(name string, pick func(*Stack) *Proc, d time.Duration) Fault {
	return Fault{
		Name: "kill " + name, Mechanism: fmt.Sprintf("SIGKILL, restarted after %v", d), For: d,
		Inject: func(_ context.Context, s *Stack) error { pick(s).Kill(); return nil },
		Recover: func(ctx context.Context, s *Stack) (string, error) {
			p := pick(s)
			n, err := p.Restart(ctx)
			if n == 0 {
				return "", err
			}
			return fmt.Sprintf("%d restarts of %s exited during start-up (last log line: %s)", n, p.Name, p.refusal), err
		},
	}
}

// freezeFault is a SIGSTOP of a process for d, then SIGCONT: a hung
// dependency whose sockets stay open, so callers wait instead of being
// refused.
func freezeFault(name string, pick func(*Stack) *Proc, d time.Duration) Fault {
	return Fault{
		Name: "stop " + name, Mechanism: fmt.Sprintf("SIGSTOP for %v, then SIGCONT", d), For: d,
		Inject:  func(_ context.Context, s *Stack) error { return pick(s).Freeze(true) },
		Recover: func(_ context.Context, s *Stack) (string, error) { return "", pick(s).Freeze(false) },
	}
}

// partitionFault blackholes every connection to one decode worker (its
// fault proxy) for d.
func partitionFault(worker string, d time.Duration) Fault {
	return Fault{
		Name: "partition " + worker, For: d,
		Mechanism: fmt.Sprintf("proxy blackholes all its connections for %v", d),
		Inject:    func(_ context.Context, s *Stack) error { s.Proxies[worker].Partition(); return nil },
		Recover:   func(_ context.Context, s *Stack) (string, error) { s.Proxies[worker].Heal(); return "", nil },
	}
}

// FullSuite is every fault of `make chaos`, in turn.
func FullSuite() []Fault {
	const down = 10 * time.Second
	nth := func(ps func(*Stack) []*Proc, i int) func(*Stack) *Proc {
		return func(s *Stack) *Proc { return ps(s)[i] }
	}
	fes := func(s *Stack) []*Proc { return s.Frontends }
	rts := func(s *Stack) []*Proc { return s.Routers }
	dec := func(s *Stack) []*Proc { return s.Decode }
	fe := killFault("frontend-0", nth(fes, 0), down)
	fe.Frontend = true
	return []Fault{
		{Name: "none (baseline)", Mechanism: "no fault", For: down},
		fe,
		killFault("router-0", nth(rts, 0), down),
		killFault("prefill-0", func(s *Stack) *Proc { return s.Prefill }, down),
		killFault("decode-1", nth(dec, 1), down),
		killFault("kvbm-controller", func(s *Stack) *Proc { return s.KVBM }, down),
		killFault("planner", func(s *Stack) *Proc { return s.Planner }, down),
		freezeFault("consul", func(s *Stack) *Proc { return s.Consul }, 30*time.Second),
		freezeFault("redis", func(s *Stack) *Proc { return s.Redis }, 30*time.Second),
		partitionFault("decode-2", 30*time.Second),
	}
}

// ShortSuite is the chaos run of `make test`.
func ShortSuite() []Fault {
	return []Fault{
		killFault("router-0", func(s *Stack) *Proc { return s.Routers[0] }, 5*time.Second),
		killFault("decode-1", func(s *Stack) *Proc { return s.Decode[1] }, 5*time.Second),
		freezeFault("redis", func(s *Stack) *Proc { return s.Redis }, 10*time.Second),
	}
}

// Result is one fault's outcome.
type Result struct {
	Fault Fault
	Phase *Phase
	Index IndexCheck
	Err   error  // the fault could not be injected or recovered
	Note  string // what recovery took, when worth telling
}

// RunOpts times each round.
type RunOpts struct {
	Clients int           // requests in flight
	Before  time.Duration // load before the fault
	After   time.Duration // load after recovery
}

// Run injects each fault in turn under load and checks the index after
// its recovery.
func Run(t testing.TB, s *Stack, l *Load, faults []Fault, o RunOpts) []Result {
	ctx := t.Context()
	mw := WatchCounters(ctx, l, s)
	var out []Result
	for _, f := range faults {
		if down := s.notRunning(); len(down) > 0 {
			// Nothing in the suite stops a process between rounds: on a
			// shared machine something else did, and the rest would measure
			// that instead.
			t.Errorf("before fault %q: %v not running (log in %s)", f.Name, down, s.Dir)
			break
		}
		t.Logf("fault %q: %s", f.Name, f.Mechanism)
		p := l.SetPhase(f.Name)
		lctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(lctx, o.Clients) })
		r := Result{Fault: f, Phase: p}
		sleep(ctx, o.Before)
		mw.Poll(ctx)
		if f.Inject != nil {
			r.Err = f.Inject(ctx, s)
		}
		sleep(ctx, f.For)
		if f.Recover != nil && r.Err == nil {
			r.Note, r.Err = f.Recover(ctx, s)
		}
		sleep(ctx, o.After)
		stop()
		wg.Wait()
		mw.Poll(ctx)
		r.Index = CheckIndex(ctx, s, 30*time.Second)
		t.Logf("fault %q: sent %d ok %d failed %d migrated %d retried %d index match %v %v",
			f.Name, p.Sent.Load(), p.OK.Load(), p.Failed.Load(), p.Migrated.Load(), p.Retried.Load(), r.Index.Match, r.Index.Mismatches)
		if r.Note != "" {
			t.Logf("  note: %s", r.Note)
		}
		for _, e := range p.Errors() {
			t.Logf("  failure: %s", e)
		}
		out = append(out, r)
		if r.Err != nil {
			t.Errorf("fault %q: %v", f.Name, r.Err)
			break
		}
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
