// Package child runs an engine server as a child process of its worker:
// started before the worker registers, stopped when it stops, and never
// outliving it (on Linux the kernel kills it if the worker dies first).
//
// The child's output is kept in a bounded buffer, so a child that fails
// to start is reported with the end of what it printed, and written to a
// log file when one is configured.
package child

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config configures a child process.
type Config struct {
	// Path and Args are the command line (no shell).
	Path string
	Args []string
	// LogFile, when set, receives the child's output (appended).
	LogFile string
	Logger  *slog.Logger
}

// Process is a started child.
type Process struct {
	cmd  *exec.Cmd
	tail *tail
	logf *os.File
	done chan struct{}
	err  error // set before done closes
}

// Start starts the child.
func Start(cfg Config) (*Process, error) {
	p := &Process{tail: &tail{max: 16 << 10}, done: make(chan struct{})}
	var out io.Writer = p.tail
	if cfg.LogFile != "" {
		f, err := os.OpenFile(cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("engine log: %w", err)
		}
		p.logf = f
		out = io.MultiWriter(p.tail, f)
	}
	p.cmd = exec.Command(cfg.Path, cfg.Args...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		p.closeLog()
		return nil, fmt.Errorf("starting %s: %w", cfg.Path, err)
	}
	if cfg.Logger != nil {
		cfg.Logger.Info("engine process started", "path", cfg.Path, "pid", p.cmd.Process.Pid)
	}
	go func() {
		err := p.cmd.Wait()
		if err == nil {
			err = errors.New("exited with status 0")
		}
		p.err = fmt.Errorf("%s (pid %d): %w", cfg.Path, p.cmd.Process.Pid, err)
		p.closeLog()
		close(p.done)
	}()
	return p, nil
}

func (p *Process) closeLog() {
	if p.logf != nil {
		_ = p.logf.Close()
	}
}

// Done is closed when the child has exited; Err then says how.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the child exited, or nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Tail is the end of the child's output.
func (p *Process) Tail() string { return p.tail.String() }

// Stop asks the child to exit (SIGTERM), kills it when it has not within
// grace, and waits until it is gone or ctx ends.
func (p *Process) Stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("engine process %d: %w", p.cmd.Process.Pid, ctx.Err())
	}
}

// tail keeps the last max bytes written.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
