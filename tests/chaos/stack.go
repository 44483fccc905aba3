package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/tests/e2e"
)

// Config shapes the stack.
type Config struct {
	Frontends, Routers, Decode int
	// Executor is the workers' -executor: llama (stories260K, real
	// greedy text) or sim.
	Executor string
	// DisaggThreshold is the uncached prompt length above which a request
	// is prefilled on the prefill worker.
	DisaggThreshold int
	// DecodeBlocks is each decode worker's KV cache, in blocks: small, so
	// the load's prompts do not all stay cached.
	DecodeBlocks int
}

// APIKey is the key the load sends; its limits are kept in Redis, so
// every request passes through the Redis-backed limiter.
const APIKey = "chaos-key"

// Stack is the local mesh under test: real processes on loopback, real
// Consul for discovery, real Redis for router snapshots and the
// frontends' shared limits.
type Stack struct {
	Dir       string
	Consul    *Proc
	Redis     *Proc
	Frontends []*Proc
	Routers   []*Proc
	Decode    []*Proc
	Prefill   *Proc
	KVBM      *Proc
	Planner   *Proc
	// Proxies holds the fault proxy in front of each decode worker, by
	// the worker's name.
	Proxies map[string]*Proxy
	Model   string
}

func addr(t testing.TB) string { return "127.0.0.1:" + strconv.Itoa(deptest.FreePort(t)) }

// StartStack builds the binaries and starts every process, in dependency
// order, and waits until the frontends serve the model.
func StartStack(t testing.TB, cfg Config) *Stack {
	t.Helper()
	bin := os.Getenv("CHAOS_BIN") // prebuilt service binaries; default: build them
	if bin == "" {
		bin = e2e.Build(t)
	}
	model, tok := e2e.StoriesModel(t)
	s := &Stack{Dir: t.TempDir(), Proxies: map[string]*Proxy{}}
	if d := os.Getenv("CHAOS_LOGS"); d != "" {
		s.Dir = d
		_ = os.MkdirAll(d, 0o755)
	}
	t.Logf("stack logs in %s", s.Dir)
	ctx := t.Context()
	must := func(p *Proc) *Proc {
		t.Helper()
		t.Cleanup(p.Kill)
		if err := p.start(ctx); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mesh = plainMesh()
	if tlsOn() {
		m, err := tlsMesh(filepath.Join(s.Dir, "certs"))
		if err != nil {
			t.Fatal(err)
		}
		mesh = m
	}
	s.Consul = must(consulProc(t, s.Dir))
	s.Redis = must(redisProc(t, s.Dir))
	common := append([]string{"-discovery", "consul", "-consul-addr", s.Consul.Addr, "-drain-timeout", "2s", "-log-level", "info"}, mesh.args...)
	svc := func(name, kind string, args ...string) *Proc {
		a := addr(t)
		return newProc(s.Dir, name, kind, a, filepath.Join(bin, kind), append(append([]string{"-id", name, "-listen", a}, common...), args...)...)
	}
	worker := []string{"-executor", cfg.Executor}
	if cfg.Executor == "llama" {
		worker = append(worker, "-model", model, "-tokenizer", tok)
	}
	disagg := []string{"-disagg-threshold-tokens", strconv.Itoa(cfg.DisaggThreshold)}
	for i := range cfg.Decode {
		name := fmt.Sprintf("decode-%d", i)
		p := svc(name, "decode", append(append(worker, disagg...), "-num-blocks", strconv.Itoa(cfg.DecodeBlocks))...)
		px, err := NewProxy(addr(t), p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = px.Close() })
		s.Proxies[name] = px
		p.args = append(p.args, "-advertise", px.Addr())
		s.Decode = append(s.Decode, must(p))
	}
	s.Prefill = must(svc("prefill-0", "prefill", worker...))
	for i := range cfg.Routers {
		s.Routers = append(s.Routers, must(svc(fmt.Sprintf("router-%d", i), "router", append([]string{"-mode", "kv",
			"-redis-addr", s.Redis.Addr, "-snapshot-interval", "2s", "-namespace", "chaos"}, disagg...)...)))
	}
	s.KVBM = must(svc("kvbm-0", "kvbm-controller"))
	s.Planner = must(svc("planner-0", "planner", "-interval", "2s"))
	keys := filepath.Join(s.Dir, "api-keys")
	if err := os.WriteFile(keys, []byte(APIKey+" name=chaos rps=100000 concurrency=10000 tpm=1000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Frontends {
		s.Frontends = append(s.Frontends, must(svc(fmt.Sprintf("frontend-%d", i), "frontend",
			append([]string{"-api-keys-file", keys, "-limits-redis-addr", s.Redis.Addr, "-limits-namespace", "chaos"}, mesh.public...)...)))
	}
	s.Model = s.waitModel(t)
	return s
}

// Procs lists every Switchyard process (not Consul or Redis).
func (s *Stack) Procs() []*Proc {
	out := append([]*Proc{}, s.Frontends...)
	out = append(out, s.Routers...)
	out = append(out, s.Prefill)
	out = append(out, s.Decode...)
	return append(out, s.KVBM, s.Planner)
}

// Workers lists the processes that hold KV caches the routers index.
func (s *Stack) Workers() []*Proc { return append([]*Proc{s.Prefill}, s.Decode...) }

// waitModel waits until every frontend lists the model and every decode
// worker is routable, and returns the model id.
func (s *Stack) waitModel(t testing.TB) string {
	t.Helper()
	var id string
	deptest.Eventually(t, 90*time.Second, "frontends to list a model", func() bool {
		for _, f := range s.Frontends {
			m, err := listModel(t.Context(), f.Addr)
			if err != nil || m == "" {
				return false
			}
			id = m
		}
		return true
	})
	return id
}

func listModel(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, mesh.url(addr)+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+APIKey)
	res, err := mesh.client(0).Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || len(body.Data) == 0 {
		return "", err
	}
	return body.Data[0].ID, nil
}

// consulProc is a Consul dev agent on free ports, up once it has a leader.
func consulProc(t testing.TB, dir string) *Proc {
	bin := deptest.Binary(t, "consul", "CONSUL_BIN")
	ports := map[string]string{}
	for _, k := range []string{"http", "grpc", "grpc-tls", "serf-lan", "serf-wan", "server", "dns"} {
		ports[k] = strconv.Itoa(deptest.FreePort(t))
	}
	a := "127.0.0.1:" + ports["http"]
	p := newProc(dir, "consul", "consul", a, bin, "agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-node", "switchyard-chaos", "-log-level", "warn",
		"-http-port", ports["http"], "-grpc-port", ports["grpc"], "-grpc-tls-port", ports["grpc-tls"],
		"-serf-lan-port", ports["serf-lan"], "-serf-wan-port", ports["serf-wan"],
		"-server-port", ports["server"], "-dns-port", ports["dns"])
	p.ready = func(hc *http.Client) bool {
		res, err := hc.Get("http://" + a + "/v1/status/leader")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var leader string
		return json.NewDecoder(res.Body).Decode(&leader) == nil && strings.Contains(leader, ":")
	}
	return p
}

// redisProc is a redis-server without persistence, up once it accepts.
func redisProc(t testing.TB, dir string) *Proc {
	bin := deptest.Binary(t, "redis-server", "REDIS_BIN")
	a := addr(t)
	_, port, _ := net.SplitHostPort(a)
	p := newProc(dir, "redis", "redis", a, bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir)
	p.ready = func(*http.Client) bool {
		c, err := net.DialTimeout("tcp", a, 200*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	return p
}

// notRunning names the processes of the stack that are not running.
func (s *Stack) notRunning() []string {
	var out []string
	for _, p := range append(s.Procs(), s.Consul, s.Redis) {
		if p.Pid() == 0 {
			out = append(out, p.Name)
		}
	}
	return out
}
