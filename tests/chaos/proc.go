package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one process of the stack that faults act on: it can be killed
// (SIGKILL, a crash), restarted with the same arguments and address, and
// frozen (SIGSTOP, a hung process whose sockets stay open). tests/e2e's
// Proc cannot be restarted or frozen, so the stack keeps its own.
type Proc struct {
	Name string // instance name, e.g. "decode-1"
	Kind string // what kind of process, e.g. "decode"
	Addr string // the address it serves on (its /health and /metrics)
	// ready reports the process up; nil: /health on Addr answers 200.
	ready func(*http.Client) bool

	bin  string
	args []string
	log  string

	refusal string // the last line of the last run that exited during start-up
	logFrom int64  // where the current run's log begins

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs the process and waits until it is up.
func (p *Proc) start(ctx context.Context) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s log: %w", p.Name, err)
	}
	fmt.Fprintf(f, "\n==== start %s %s\n", time.Now().Format(time.RFC3339Nano), p.Name)
	if st, err := f.Stat(); err == nil {
		p.logFrom = st.Size()
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return p.waitUp(ctx, done)
}

func (p *Proc) waitUp(ctx context.Context, done chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	hc := mesh.client(time.Second)
	for {
		if p.up(hc) {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited during start-up; log %s", p.Name, p.log)
		case <-ctx.Done():
			return fmt.Errorf("%s not up within 90s; log %s", p.Name, p.log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *Proc) up(hc *http.Client) bool {
	if p.ready != nil {
		return p.ready(hc)
	}
	res, err := hc.Get(mesh.url(p.Addr) + "/health")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK && p.registered()
}

// registered reports whether the current run logged that it serves,
// which a Switchyard service does once discovery took its registration
// (libs/mesh/server): healthy before that, it may still exit, refused.
func (p *Proc) registered() bool {
	f, err := os.Open(p.log)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, p.logFrom, 1<<30))
	return err == nil && strings.Contains(string(b), "msg=serving")
}

// Pid is the process id of the current run, 0 when it is not running.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil || p.exited() {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *Proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL to the process group and waits for the exit.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Restart starts the process again after Kill, with the same arguments,
// as a supervisor does: a run that exits during start-up is started again
// a second later, for up to a minute. It returns the runs that exited.
func (p *Proc) Restart(ctx context.Context) (refused int, err error) {
	deadline := time.Now().Add(time.Minute)
	for {
		err := p.start(ctx)
		if !p.exited() || time.Now().After(deadline) {
			return refused, err
		}
		refused++
		p.refusal = p.lastLine()
		select {
		case <-ctx.Done():
			return refused, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Freeze stops (SIGSTOP) or resumes (SIGCONT) the process.
func (p *Proc) Freeze(stop bool) error {
	pid := p.Pid()
	if pid == 0 {
		return fmt.Errorf("%s is not running", p.Name)
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("%v %s: %w", sig, p.Name, err)
	}
	return nil
}

// newProc describes a process whose log goes to dir/<name>.log.
func newProc(dir, name, kind, addr, bin string, args ...string) *Proc {
	return &Proc{Name: name, Kind: kind, Addr: addr, bin: bin, args: args, log: filepath.Join(dir, name+".log")}
}

// lastLine is the last line the process logged, for notes.
func (p *Proc) lastLine() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
