package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/mesh/telemetry"
	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/tcp"
	"switchyard.dev/libs/nixl/backend/ucx"
	"switchyard.dev/libs/worker/disagg"
	"switchyard.dev/libs/worker/handler"
	"switchyard.dev/libs/worker/metrics"
)

// transferBackends parses -kv-transfer; nil means none. With tlsc the tcp
// backend authenticates peers by the mesh certificates before it takes a
// write; UCX has no such check (docs/security.md).
func transferBackends(list, tcpAddr string, tlsc *tcp.TLS, isolate bool) ([]nixl.BackendFactory, error) {
	if list == "none" {
		return nil, nil
	}
	var out []nixl.BackendFactory
	for name := range strings.SplitSeq(list, ",") {
		switch strings.TrimSpace(name) {
		case "tcp":
			out = append(out, tcp.New(tcp.Config{Addr: tcpAddr, TLS: tlsc}))
		case "ucx":
			out = append(out, ucx.New(ucx.Config{Isolate: isolate}))
		default:
			return nil, fmt.Errorf("-kv-transfer=%q: unknown backend %q (want tcp, ucx, or none)", list, name)
		}
	}
	return out, nil
}

// transferTLS is the tcp backend's mutual TLS with the instance's mesh
// certificates (nil without -tls-cert): peers need a certificate from
// -tls-ca whatever -tls-require-client-cert says, since a write lands in
// the engine's KV memory.
func transferTLS(rt *service.Runtime) *tcp.TLS {
	if rt.TLS == nil {
		return nil
	}
	return &tcp.TLS{Server: rt.TLS.ServerConfig(true), Client: rt.TLS.ClientConfig}
}

// transfer is a worker's KV transfer agent with the engine's arena
// registered. The metadata blob travels in each RemotePrefill request
// rather than in discovery: it is small (an address per backend and the
// region's keys), always current, and the prefill worker needs it only
// when asked to write.
type transfer struct {
	agent  *nixl.Agent
	region nixl.RegionID
	// changed re-publishes the agent's endpoints (set by publish): a
	// backend lost while the worker runs leaves them.
	changed atomic.Pointer[func()]
}

// onChange sets what runs when the agent's endpoints change.
func (t *transfer) onChange(f func()) { t.changed.Store(&f) }

func newTransfer(cfg *Config, name string, arena []byte, tlsc *tcp.TLS, log *slog.Logger) (*transfer, error) {
	backends, err := transferBackends(cfg.KVTransfer, cfg.KVTransferAddr, tlsc, cfg.sharedKV())
	if err != nil || backends == nil {
		return nil, err
	}
	if len(arena) == 0 {
		log.Info("executor keeps no KV arena (simulator): no KV transfer, prompts are prefilled locally")
		return nil, nil
	}
	t := &transfer{}
	a, err := nixl.NewAgent(nixl.Config{Name: name, Backends: backends, Preference: strings.Split(strings.ReplaceAll(cfg.KVTransfer, " ", ""), ","), Logger: log,
		OnChange: func() {
			if f := t.changed.Load(); f != nil {
				(*f)()
			}
		}})
	if err != nil {
		return nil, fmt.Errorf("-kv-transfer=%q: %w", cfg.KVTransfer, err)
	}
	id, err := a.RegisterMemory(arena)
	if err != nil {
		_ = a.Close()
		return nil, fmt.Errorf("registering the KV arena: %w", err)
	}
	t.agent, t.region = a, id
	return t, nil
}

// close deregisters the arena (waiting for in-flight accesses, bounded)
// and closes the agent; the engine may unmap the arena afterwards.
func (t *transfer) close(log *slog.Logger) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.agent.DeregisterMemory(ctx, t.region); err != nil {
		log.Warn("deregistering the KV arena", "err", err)
	}
	if err := t.agent.Close(); err != nil {
		log.Warn("closing the KV transfer agent", "err", err)
	}
}

// prefillDialer returns the Dial of disaggregated decode: one cached
// WorkerService client per prefill worker, addressed by base URL
// (http://host:port, or host:port).
func prefillDialer(tel *telemetry.Telemetry, hc *http.Client) (func(baseURL string) disagg.Prefiller, error) {
	opts, err := client.Options(tel)
	if err != nil {
		return nil, fmt.Errorf("prefill clients: %w", err)
	}
	clients := client.NewCache(hc, workerv1connect.NewWorkerServiceClient, opts...)
	return func(baseURL string) disagg.Prefiller {
		if !strings.Contains(baseURL, "://") {
			baseURL = "http://" + baseURL
		}
		return clients.Get(baseURL)
	}, nil
}

// disaggHooks builds the transfer agent and both sides of disaggregated
// prefill for the handler. Without a transfer agent (-kv-transfer=none)
// the worker neither exports KV nor imports it, but still records TTFT.
func disaggHooks(ctx context.Context, rt *service.Runtime, cfg *Config, eng *engine.Engine, log *slog.Logger) (handler.Config, *transfer, error) {
	var hc handler.Config
	ttft, err := metrics.NewTTFT(rt.Telemetry.Meter, cfg.ModelName)
	if err != nil {
		return hc, nil, err
	}
	hc.Phases = func() *workerv1.TtftPhases {
		t := ttft.Totals()
		return &workerv1.TtftPhases{Requests: t.Requests, QueueSeconds: t.Queue, PrefillSeconds: t.Prefill,
			TransferSeconds: t.Transfer, FirstDecodeSeconds: t.FirstDecode}
	}
	name := rt.Server.Instance().ID
	if name == "" {
		name = fmt.Sprintf("worker-%d", time.Now().UnixNano())
	}
	tr, err := newTransfer(cfg, name, eng.KV().Arena, transferTLS(rt), log.With("component", "kv-transfer"))
	if err != nil {
		return hc, nil, err
	}
	tracer := rt.Telemetry.Tracer.Tracer(metrics.ScopeName)
	dc := disagg.DecodeConfig{
		Engine: eng, Model: cfg.ModelName, Mode: cfg.Disagg, Threshold: cfg.DisaggThreshold, Timeout: cfg.DisaggTimeout,
		Observer: ttft,
		Tracer:   tracer, Logger: log.With("component", "disagg"),
	}
	if tr != nil {
		dial, err := prefillDialer(rt.Telemetry, rt.HTTPClient())
		if err != nil {
			tr.close(log)
			return hc, nil, err
		}
		dc.Agent, dc.Dial = tr.agent, dial
		xc := disagg.ExportConfig{Engine: eng, Agent: tr.agent, Region: tr.region, Tracer: tracer, Logger: dc.Logger}
		if rt.Registry != nil {
			g, err := newTargetGuard(ctx, rt.Registry, dc.Logger)
			if err != nil {
				tr.close(log)
				return hc, nil, err
			}
			xc.CheckTarget = g.check
		} else {
			log.Info("no discovery: remote prefill targets are not checked against it (any decode agent a request names is written to)")
		}
		hc.Exporter = disagg.NewExporter(xc)
	}
	hc.Disagg = disagg.NewDecoder(dc)
	return hc, tr, nil
}
