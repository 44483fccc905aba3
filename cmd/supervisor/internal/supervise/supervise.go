// Package supervise runs a local stack: it starts every pool of a spec in
// order, restarts an instance that exits without being asked to (after a
// capped, jittered backoff, reported), and adds or drains instances of a
// scalable pool on request (Handler serves that as the Connect
// SupervisorService, the planner's local actuator).
//
// Draining is SIGTERM: a Switchyard service then leaves discovery,
// finishes its streams and exits, so removing an instance loses no
// request. One that has not exited within the spec's stop timeout is
// killed. Stopping the stack drains the pools in reverse start order, so
// the frontend goes first and the dependencies (Consul) last.
//
// Each instance runs in its own process group (a Ctrl-C at the terminal
// reaches the supervisor alone, which then stops the stack in order), and
// is killed by the kernel if the supervisor itself dies (Pdeathsig), so
// no process outlives it.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	supervisorv1 "switchyard.dev/gen/switchyard/supervisor/v1"

	"switchyard.dev/cmd/supervisor/internal/spec"
	"switchyard.dev/libs/mesh/backoff"
)

// Backoff after a crash: the wait before the first restart is at most
// backoffBase, each consecutive crash doubles that ceiling up to
// backoffMax, and the wait is drawn below it with full jitter (package
// backoff), so that instances that crashed together (a dependency went
// away under all of them) do not restart in lockstep. A process that ran
// stableAfter counts as healthy again.
const (
	backoffBase = 250 * time.Millisecond
	backoffMax  = 10 * time.Second
	stableAfter = 30 * time.Second
	pollEvery   = 200 * time.Millisecond
)

// restartBackoff is the schedule of a crashing instance's restarts.
var restartBackoff = backoff.Policy{Base: backoffBase, Max: backoffMax}

// Errors of Add and Remove, which the handler maps to Connect codes.
var (
	ErrUnknownPool = errors.New("no such pool")
	ErrNotScalable = errors.New("the pool is not scalable")
	ErrBounds      = errors.New("outside the pool's bounds")
	ErrNoInstance  = errors.New("no such instance")
	ErrStopping    = errors.New("the supervisor is stopping")
)

// Supervisor runs one spec.
type Supervisor struct {
	spec *spec.Spec
	log  *slog.Logger
	out  io.Writer // what a user at the terminal reads

	mu       sync.Mutex
	pools    []*pool
	stopping bool
	wg       sync.WaitGroup
}

type pool struct {
	spec  *spec.Pool
	insts map[int]*instance // by index
}

// New returns a supervisor of s; Run starts it. Lines for the user go to
// out, the rest to log.
func New(s *spec.Spec, out io.Writer, log *slog.Logger) *Supervisor {
	sv := &Supervisor{spec: s, log: log, out: out}
	for i := range s.Pools {
		sv.pools = append(sv.pools, &pool{spec: &s.Pools[i], insts: map[int]*instance{}})
	}
	return sv
}

// Run starts the stack, serves until ctx ends, then stops it. It fails,
// having stopped what it started, when an instance exits or is not ready
// in time while the stack starts.
func (sv *Supervisor) Run(ctx context.Context) error {
	if err := os.MkdirAll(sv.spec.Logs, 0o755); err != nil {
		return fmt.Errorf("supervisor: logs: %w", err)
	}
	err := sv.start(ctx)
	if err == nil {
		if sv.spec.Banner != "" {
			fmt.Fprint(sv.out, sv.spec.Banner)
		}
		<-ctx.Done()
	}
	sv.stopAll()
	return err
}

// start starts every pool in order, waiting for the ones marked Wait
// before the next and for all at the end.
func (sv *Supervisor) start(ctx context.Context) error {
	var all []*instance
	for _, p := range sv.pools {
		var these []*instance
		for range *p.spec.Count {
			in, err := sv.add(p)
			if err != nil {
				return err
			}
			these = append(these, in)
		}
		all = append(all, these...)
		if p.spec.Wait {
			if err := waitReady(ctx, these); err != nil {
				return err
			}
		}
	}
	return waitReady(ctx, all)
}

// waitReady waits for each instance's first readiness; an instance that
// exits first, or is not ready within its check's timeout, fails it.
func waitReady(ctx context.Context, ins []*instance) error {
	for _, in := range ins {
		timeout := time.Duration(0)
		if r := in.pool.spec.Ready; r != nil {
			timeout = time.Duration(r.Timeout)
		}
		var expire <-chan time.Time
		if timeout > 0 {
			t := time.NewTimer(time.Until(in.created.Add(timeout)))
			defer t.Stop()
			expire = t.C
		}
		select {
		case <-in.ready:
		case err := <-in.failed:
			return fmt.Errorf("supervisor: %s exited while starting (%w); see %s", in.id(), err, in.logPath)
		case <-expire:
			return fmt.Errorf("supervisor: %s not ready after %v; see %s", in.id(), timeout, in.logPath)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Add starts n instances of a scalable pool.
func (sv *Supervisor) Add(name string, n int) ([]*supervisorv1.Instance, error) {
	p, err := sv.scalable(name)
	if err != nil {
		return nil, err
	}
	sv.mu.Lock()
	if live := p.live(); n <= 0 || live+n > p.spec.Max {
		sv.mu.Unlock()
		return nil, fmt.Errorf("%w: pool %s has %d, at most %d: cannot add %d", ErrBounds, name, live, p.spec.Max, n)
	}
	// The check and the additions under one lock: two calls at once
	// cannot both pass the bound.
	var ins []*instance
	for range n {
		in, err := sv.addLocked(p)
		if err != nil {
			sv.mu.Unlock()
			return nil, err
		}
		ins = append(ins, in)
	}
	sv.mu.Unlock()
	out := make([]*supervisorv1.Instance, len(ins))
	for i, in := range ins {
		<-in.launched
		out[i] = sv.describe(in)
	}
	return out, nil
}

// Remove drains instance id of a scalable pool (its newest when id is
// empty).
func (sv *Supervisor) Remove(name, id string) (*supervisorv1.Instance, error) {
	p, err := sv.scalable(name)
	if err != nil {
		return nil, err
	}
	sv.mu.Lock()
	var victim *instance
	for _, in := range p.insts {
		if in.draining() {
			continue
		}
		if (id == "" && (victim == nil || in.index > victim.index)) || in.id() == id {
			victim = in
		}
	}
	switch live := p.live(); {
	case victim == nil && id != "":
		sv.mu.Unlock()
		return nil, fmt.Errorf("%w: %q in pool %s (or it is draining already)", ErrNoInstance, id, name)
	case victim == nil || live-1 < p.spec.Min:
		sv.mu.Unlock()
		return nil, fmt.Errorf("%w: pool %s has %d, at least %d", ErrBounds, name, live, p.spec.Min)
	}
	victim.requestStop()
	sv.mu.Unlock()
	sv.log.Info("draining", "instance", victim.id(), "pool", name)
	return sv.describe(victim), nil
}

func (sv *Supervisor) scalable(name string) (*pool, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.stopping {
		return nil, ErrStopping
	}
	for _, p := range sv.pools {
		if p.spec.Name == name {
			if !p.spec.Scalable {
				return nil, fmt.Errorf("%w: %s", ErrNotScalable, name)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownPool, name)
}

// live counts the instances not draining. Caller holds sv.mu.
func (p *pool) live() int {
	n := 0
	for _, in := range p.insts {
		if !in.draining() {
			n++
		}
	}
	return n
}

// add creates and starts the pool's instance at its lowest free index.
func (sv *Supervisor) add(p *pool) (*instance, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.addLocked(p)
}

// addLocked is add with sv.mu held.
func (sv *Supervisor) addLocked(p *pool) (*instance, error) {
	if sv.stopping {
		return nil, ErrStopping
	}
	i := 0
	for p.insts[i] != nil {
		i++
	}
	names := p.spec.Instance(i)
	in := &instance{sv: sv, pool: p, index: i, names: names, created: time.Now(),
		logPath: filepath.Join(sv.spec.Logs, names.ID+".log"),
		stop:    make(chan struct{}), ready: make(chan struct{}), failed: make(chan error, 1), exited: make(chan struct{}), launched: make(chan struct{}),
		state: supervisorv1.InstanceState_INSTANCE_STATE_STARTING}
	p.insts[i] = in
	sv.writeTargetsLocked()
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		in.run()
		sv.mu.Lock()
		delete(p.insts, i)
		sv.writeTargetsLocked()
		sv.mu.Unlock()
	}()
	return in, nil
}

// stopAll drains every pool, the last started first, each bounded by the
// stop timeout (then killed).
func (sv *Supervisor) stopAll() {
	sv.mu.Lock()
	sv.stopping = true
	pools := slices.Clone(sv.pools)
	sv.mu.Unlock()
	n := 0
	for _, p := range slices.Backward(pools) {
		sv.mu.Lock()
		var ins []*instance
		for _, in := range p.insts {
			in.requestStop()
			ins = append(ins, in)
		}
		sv.mu.Unlock()
		for _, in := range ins {
			<-in.exited
			n++
		}
	}
	sv.wg.Wait()
	fmt.Fprintf(sv.out, "supervisor: stopped %d processes; logs kept in %s\n", n, sv.spec.Logs)
}

// List describes the pools and their instances, in start order.
func (sv *Supervisor) List(pool string) *supervisorv1.ListInstancesResponse {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	res := &supervisorv1.ListInstancesResponse{}
	for _, p := range sv.pools {
		if pool != "" && p.spec.Name != pool {
			continue
		}
		res.Pools = append(res.Pools, &supervisorv1.Pool{Name: p.spec.Name, Scalable: p.spec.Scalable,
			MinInstances: uint32(p.spec.Min), MaxInstances: uint32(p.spec.Max), Instances: uint32(len(p.insts))})
		idx := slices.Sorted(maps.Keys(p.insts))
		for _, i := range idx {
			res.Instances = append(res.Instances, p.insts[i].describeLocked())
		}
	}
	return res
}

func (sv *Supervisor) describe(in *instance) *supervisorv1.Instance {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return in.describeLocked()
}

// restartWait is the wait before restart n (1-based) of a crashing
// instance, drawn from r (nil: math/rand/v2).
func restartWait(n int, r backoff.Source) time.Duration { return restartBackoff.Delay(n, r) }

// procAttr puts a child in its own process group, killed with the
// supervisor.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
