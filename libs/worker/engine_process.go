package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"switchyard.dev/libs/mesh/backoff"
	"switchyard.dev/libs/worker/engines/child"
)

// engineProcess is the engine server a worker started (-llama-server-bin,
// -engine-cmd) and keeps running: restarted with capped, jittered backoff when it
// dies, stopped with the worker. A nil *engineProcess is an engine the
// worker only connects to (-engine-url).
type engineProcess struct {
	cfg  child.Config
	addr string // llama-server's URL when the worker picked its port
	flag string // the setting that started it, for errors
	p    *child.Process
}

// startEngineProcess starts the engine process cfg asks for, or returns
// nil when the engine runs elsewhere.
func startEngineProcess(cfg *Config, log *slog.Logger) (*engineProcess, error) {
	e := &cfg.EngineCfg
	ep := &engineProcess{}
	switch {
	case e.LlamaServerBin != "":
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("-llama-server-bin: picking a port: %w", err)
		}
		ep.addr = "http://127.0.0.1:" + strconv.Itoa(port)
		ep.flag = fmt.Sprintf("-llama-server-bin=%q -model=%q", e.LlamaServerBin, cfg.Model)
		args := []string{"--model", cfg.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--parallel", strconv.Itoa(e.Slots), "--ctx-size", strconv.Itoa(e.Slots * e.Context), "--no-kv-unified",
			// Each slot keeps only its own last sequence: what the worker's
			// mirrors of the slots model (no host prompt cache).
			"--cache-ram", "0", "--metrics", "--slots", "--alias", cfg.ModelName, "--no-webui"}
		args = append(args, strings.Fields(e.ExtraArgs)...)
		ep.cfg = child.Config{Path: e.LlamaServerBin, Args: args, LogFile: e.LogFile, Logger: log}
	case e.Cmd != "":
		f := strings.Fields(e.Cmd)
		ep.flag = fmt.Sprintf("-engine-cmd=%q -engine-url=%q", e.Cmd, e.URL)
		ep.cfg = child.Config{Path: f[0], Args: f[1:], LogFile: e.LogFile, Logger: log}
	default:
		return nil, nil
	}
	p, err := child.Start(ep.cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ep.flag, err)
	}
	ep.p = p
	return ep, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// url is where the engine answers.
func (ep *engineProcess) url(cfg *Config) string {
	if ep != nil && ep.addr != "" {
		return ep.addr
	}
	return cfg.EngineCfg.URL
}

// setting names the flags that reach the engine, for errors.
func (ep *engineProcess) setting(cfg *Config) string {
	if ep != nil {
		return ep.flag
	}
	return fmt.Sprintf("-engine-url=%q", cfg.EngineCfg.URL)
}

// exited is closed when the current process exits (never without one).
func (ep *engineProcess) exited() <-chan struct{} {
	if ep == nil {
		return nil
	}
	return ep.p.Done()
}

// engineRestart spaces the restarts of an engine process that keeps
// dying: the ceiling doubles from 1s to 30s, the wait is drawn below it
// (full jitter, package backoff), so that the workers of a host whose
// engines died together do not restart them in lockstep.
var engineRestart = backoff.Policy{Base: time.Second, Max: 30 * time.Second}

// downer is an engine told at once that its process died.
type downer interface{ Down(error) }

// supervise restarts the process whenever it exits, until ctx ends.
func (ep *engineProcess) supervise(ctx context.Context, eng any, log *slog.Logger) {
	if ep == nil {
		return
	}
	restart := backoff.New(engineRestart, nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ep.p.Done():
		}
		err := ep.p.Err()
		wait := restart.Next()
		log.Error("engine process exited; restarting it", "err", err, "in", wait, "output", lastLines(ep.p.Tail(), 5))
		if d, ok := eng.(downer); ok {
			d.Down(err)
		}
		if !backoff.Sleep(ctx, wait) {
			return
		}
		p, err := child.Start(ep.cfg)
		if err != nil {
			log.Error("restarting the engine process", "err", err)
			continue
		}
		ep.p = p
	}
}

// stop stops the process (SIGTERM, then SIGKILL after a grace).
func (ep *engineProcess) stop(log *slog.Logger) {
	if ep == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := ep.p.Stop(ctx, 10*time.Second); err != nil {
		log.Warn("stopping the engine process", "err", err)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
