package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	supervisorv1 "switchyard.dev/gen/switchyard/supervisor/v1"

	"switchyard.dev/cmd/supervisor/internal/spec"
)

// instance is one process slot of a pool: the process, and the ones that
// replace it after crashes. Its fields below mu are guarded by the
// supervisor's mutex.
type instance struct {
	sv      *Supervisor
	pool    *pool
	index   int
	names   spec.Instance
	logPath string
	created time.Time

	stopOnce   sync.Once
	stop       chan struct{} // closed when asked to stop
	ready      chan struct{} // closed at the first readiness
	failed     chan error    // the exit of a process never ready while the stack starts
	exited     chan struct{} // closed when the last process has exited
	launched   chan struct{} // closed once the first process started (or failed to)
	launchOnce sync.Once

	// guarded by sv.mu
	state    supervisorv1.InstanceState
	pid      int
	started  time.Time
	restarts int
	lastExit string
}

func (in *instance) id() string { return in.names.ID }

// draining reports whether the instance was asked to stop. Caller holds
// sv.mu or does not care about a race with requestStop.
func (in *instance) draining() bool {
	select {
	case <-in.stop:
		return true
	default:
		return false
	}
}

func (in *instance) requestStop() {
	in.stopOnce.Do(func() {
		close(in.stop)
		in.state = supervisorv1.InstanceState_INSTANCE_STATE_DRAINING
	})
}

func (in *instance) setState(s supervisorv1.InstanceState) {
	in.sv.mu.Lock()
	if !in.draining() {
		in.state = s
	}
	in.sv.mu.Unlock()
}

// run starts the process and restarts it after each exit it was not asked
// for, until asked to stop.
func (in *instance) run() {
	defer close(in.exited)
	p := in.pool.spec
	everReady := false
	crashes := 0
	for {
		start := time.Now()
		err := in.once(&everReady)
		if in.draining() {
			return
		}
		ran := time.Since(start)
		if ran >= stableAfter {
			crashes = 0
		}
		crashes++
		wait := restartWait(crashes, nil)
		in.sv.mu.Lock()
		in.restarts++
		in.lastExit, in.pid = err.Error(), 0
		in.state = supervisorv1.InstanceState_INSTANCE_STATE_BACKOFF
		n := in.restarts
		in.sv.mu.Unlock()
		if !everReady {
			select {
			case in.failed <- err:
			default:
			}
		}
		fmt.Fprintf(in.sv.out, "supervisor: %s exited (%v) after %v; restart %d in %v\n",
			in.id(), err, ran.Round(time.Millisecond), n, wait.Round(time.Millisecond))
		in.sv.log.Debug("instance exited; restarting", "instance", in.id(), "pool", p.Name, "err", err,
			"ran", ran, "restart", n, "backoff", wait)
		t := time.NewTimer(wait)
		select {
		case <-in.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// once runs one process to its exit and returns why it exited.
func (in *instance) once(everReady *bool) error {
	defer in.launchOnce.Do(func() { close(in.launched) }) // whatever happens below
	p := in.pool.spec
	logf, err := os.OpenFile(in.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	defer logf.Close()
	args := in.names.ExpandAll(p.Command)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.SysProcAttr = procAttr()
	in.sv.mu.Lock()
	if in.draining() { // asked to stop before it started
		in.sv.mu.Unlock()
		return errors.New("stopped before start")
	}
	if err := cmd.Start(); err != nil {
		in.sv.mu.Unlock()
		return err
	}
	in.pid, in.started = cmd.Process.Pid, time.Now()
	in.state = supervisorv1.InstanceState_INSTANCE_STATE_STARTING
	in.sv.mu.Unlock()
	in.launchOnce.Do(func() { close(in.launched) })
	fmt.Fprintf(in.sv.out, "  %-18s pid %-7d log %s\n", in.id(), cmd.Process.Pid, in.logPath)

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readyNow := make(chan struct{})
	go func() {
		if in.checkReady(ctx) {
			close(readyNow)
		}
	}()
	for {
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("exit status 0")
			}
			return err
		case <-readyNow:
			readyNow = nil
			in.setState(supervisorv1.InstanceState_INSTANCE_STATE_RUNNING)
			if !*everReady {
				*everReady = true
				close(in.ready)
			}
		case <-in.stop:
			return in.drain(cmd, done)
		}
	}
}

// drain sends SIGTERM and waits for the exit, killing the process group
// once the stop timeout has passed.
func (in *instance) drain(cmd *exec.Cmd, done <-chan error) error {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(time.Duration(in.sv.spec.StopTimeout))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		in.sv.log.Warn("not stopped within the stop timeout; killing", "instance", in.id(), "timeout", time.Duration(in.sv.spec.StopTimeout))
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return <-done
	}
}

// checkReady polls the pool's readiness check until it passes (true) or
// ctx ends.
func (in *instance) checkReady(ctx context.Context) bool {
	r := in.pool.spec.Ready
	if r == nil {
		return true
	}
	client := &http.Client{Timeout: time.Second}
	check := func() bool {
		if r.HTTP != "" {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.names.Expand(r.HTTP), nil)
			if err != nil {
				return false
			}
			res, err := client.Do(req)
			if err != nil {
				return false
			}
			defer res.Body.Close()
			var body bytes.Buffer
			_, _ = body.ReadFrom(http.MaxBytesReader(nil, res.Body, 1<<20))
			return res.StatusCode/100 == 2 && strings.Contains(body.String(), r.Contains)
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		args := in.names.ExpandAll(r.Exec)
		cmd := exec.CommandContext(cctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), in.pool.spec.Env...)
		return cmd.Run() == nil
	}
	for {
		if check() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pollEvery):
		}
	}
}

// describeLocked is the instance as the API lists it. Caller holds sv.mu.
func (in *instance) describeLocked() *supervisorv1.Instance {
	out := &supervisorv1.Instance{Id: in.id(), Pool: in.pool.spec.Name, Index: uint32(in.index), State: in.state,
		Pid: int32(in.pid), Port: uint32(in.names.Port), Restarts: uint32(in.restarts), LastExit: in.lastExit, Log: in.logPath}
	if !in.started.IsZero() {
		out.StartedAt = timestamppb.New(in.started)
	}
	return out
}
