package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"switchyard.dev/libs/mesh/deptest"
)

// Decode workers run as a real Nomad job (raw_exec, the built binary,
// -discovery consul), a router and a frontend outside Nomad find them in
// the same Consul; the decode group is scaled 1→2, then 2→1, each time in
// the middle of 30 greedy streams, and every stream completes with the
// undisturbed text. The scale-down stops allocation 1 (Nomad's choice),
// which drains on SIGTERM within its kill_timeout.
//
// The requests are those of the planner's Nomad actuator
// (services/planner/internal/actuate, internal to the planner's module,
// so not imported here): POST /v1/job/:id/scale with the group's count.
func TestNomadScalesDecodeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every service under Nomad; skipped under -short")
	}
	model, tok := StoriesModel(t)
	bin := Build(t)
	consul := deptest.StartConsul(t)
	nomad := deptest.StartNomad(t, consul.Addr)
	common := []string{"-discovery", "consul", "-consul-addr", consul.Addr, "-drain-timeout", "5s"}
	if err := nomad.Do(t.Context(), http.MethodPost, "/v1/jobs", decodeJob(bin, model, tok, common), nil); err != nil {
		t.Fatal(err)
	}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t)) }
	Start(t, bin, "router", addr(), append([]string{"-id", "router-0", "-mode", "round-robin"}, common...)...)
	m := &Mesh{Frontend: Start(t, bin, "frontend", addr(), append([]string{"-id", "frontend-0"}, common...)...)}
	cc, err := api.NewClient(&api.Config{Address: consul.Addr})
	if err != nil {
		t.Fatal(err)
	}
	waitDecoders(t, cc, 1)
	c := client(m)
	id := waitModel(t, c)

	const streams, maxTokens = 30, 96
	prompts := make([]string, streams)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("Once upon a time, a dog named %d", i)
	}
	want, _ := runStreams(t, c, id, prompts, maxTokens, nil)
	check := func(phase string, got []string, usage []int64) {
		t.Helper()
		for i := range prompts {
			if got[i] != want[i] || usage[i] != maxTokens {
				t.Errorf("%s: stream %d: %q (%d tokens), want %q (%d)", phase, i, got[i], usage[i], want[i], maxTokens)
			}
		}
	}
	// scaleDuring runs the streams and scales the group to n once they are
	// under way; victim, if not "", is the metrics URL of the worker the
	// scale-down stops, which must be carrying streams at that moment.
	scaleDuring := func(n int, victim string) {
		t.Helper()
		var scaled atomic.Bool
		var running float64
		scaleErr := make(chan error, 1)
		got, usage := runStreams(t, c, id, prompts, maxTokens, func(total int) {
			if scaled.CompareAndSwap(false, true) {
				go func() {
					// From the first chunk on, the router has spread the
					// streams; wait, briefly, until the victim reports one
					// running, so the scale-down really drains.
					for try := 0; victim != "" && try < 2000; try++ {
						var err error
						if running, err = metricValue(victim, "switchyard_worker_requests_running"); err != nil {
							scaleErr <- err
							return
						}
						if running > 0 {
							break
						}
						time.Sleep(5 * time.Millisecond)
					}
					scaleErr <- scaleDecode(t, nomad, n)
				}()
			}
		})
		if !scaled.Load() {
			t.Fatalf("scale to %d never triggered", n)
		}
		if err := <-scaleErr; err != nil {
			t.Fatalf("scale to %d: %v", n, err)
		}
		check(fmt.Sprintf("scaling to %d", n), got, usage)
		if victim != "" && running == 0 {
			// The streams outran the poll (a quiet machine serves them in
			// well under a second): the scale-down still had to lose none,
			// which check asserted, but it drained nothing this run.
			t.Logf("the worker stopped by the scale to %d ran no streams when it was stopped: nothing drained this run", n)
		}
	}

	waitNomadDeployed(t, nomad)
	scaleDuring(2, "")
	var added string
	for _, e := range waitDecoders(t, cc, 2) {
		if strings.HasSuffix(e.Service.ID, "decode-1") {
			added = fmt.Sprintf("http://%s:%d/metrics", e.Service.Address, e.Service.Port)
		}
	}
	if added == "" {
		t.Fatal("no decode-1 in Consul after the scale-up")
	}
	got, usage := runStreams(t, c, id, prompts, maxTokens, nil)
	check("after scaling up", got, usage)
	if n := metricSum(t, added, "switchyard_worker_generated_tokens_total"); n == 0 {
		t.Fatal("the added worker generated nothing: the router does not use it")
	}
	waitNomadDeployed(t, nomad)
	scaleDuring(1, added)
	waitDecoders(t, cc, 1)
	if left := decodeAllocs(t, nomad); len(left) != 1 || left[0] != "switchyard-decode.decode[0]" {
		t.Errorf("running after the scale-down: %v, want the lowest index only", left)
	}
	got, usage = runStreams(t, c, id, prompts, maxTokens, nil)
	check("after scaling back", got, usage)
}

// decodeJob runs the decode binary under raw_exec on a port Nomad picks.
// kill_timeout exceeds -deregister-grace plus -drain-timeout, so Nomad's
// SIGKILL never cuts a draining worker's streams.
func decodeJob(bin, model, tok string, common []string) any {
	args := append([]string{"-id", "decode-${NOMAD_ALLOC_INDEX}", "-listen", "127.0.0.1:${NOMAD_PORT_http}",
		"-advertise", "127.0.0.1:${NOMAD_PORT_http}", "-deregister-grace", "1s",
		"-executor", "llama", "-model", model, "-tokenizer", tok}, common...)
	task := map[string]any{
		"Name": "decode", "Driver": "raw_exec",
		"KillSignal": "SIGTERM", "KillTimeout": int64(20 * time.Second),
		"Config":    map[string]any{"command": filepath.Join(bin, "decode"), "args": args},
		"Env":       map[string]string{"OTEL_TRACES_EXPORTER": "none"},
		"Resources": map[string]any{"CPU": 100, "MemoryMB": 256},
	}
	return map[string]any{"Job": map[string]any{
		"ID": "switchyard-decode", "Type": "service", "Datacenters": []string{"*"},
		"TaskGroups": []any{map[string]any{
			"Name": "decode", "Count": 1, "Tasks": []any{task},
			"Networks": []any{map[string]any{"DynamicPorts": []any{map[string]any{"Label": "http"}}}},
			"Update": map[string]any{
				"MaxParallel": 1, "HealthCheck": "task_states",
				"MinHealthyTime":   int64(time.Second),
				"HealthyDeadline":  int64(time.Minute),
				"ProgressDeadline": int64(2 * time.Minute),
			},
		}},
	}}
}

func scaleDecode(t testing.TB, n *deptest.Nomad, count int) error {
	body := map[string]any{"Count": count, "Target": map[string]string{"Group": "decode"}, "Message": "e2e"}
	return n.Do(t.Context(), http.MethodPost, "/v1/job/switchyard-decode/scale", body, nil)
}

// waitDecoders waits until n decode workers pass in Consul.
func waitDecoders(t testing.TB, c *api.Client, n int) []*api.ServiceEntry {
	t.Helper()
	var entries []*api.ServiceEntry
	deptest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d decode workers passing in Consul", n), func() bool {
		var err error
		entries, _, err = c.Health().Service("switchyard-decode", "", true, nil)
		if err != nil || len(entries) != n {
			time.Sleep(100 * time.Millisecond)
			return false
		}
		return true
	})
	return entries
}

// waitNomadDeployed waits until the job's latest deployment is over, so
// Nomad accepts the next scale.
func waitNomadDeployed(t testing.TB, n *deptest.Nomad) {
	t.Helper()
	deptest.Eventually(t, 2*time.Minute, "the decode job's deployment done", func() bool {
		var d struct{ Status string }
		if err := n.Do(t.Context(), http.MethodGet, "/v1/job/switchyard-decode/deployment", nil, &d); err != nil {
			t.Fatal(err)
		}
		if d.Status != "successful" {
			time.Sleep(100 * time.Millisecond)
			return false
		}
		return true
	})
}

// metricValue is metricSum for a goroutine other than the test's.
func metricValue(url, name string) (float64, error) {
	res, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[0] == name || strings.HasPrefix(f[0], name+"{")) {
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum, err
}

// decodeAllocs names the decode job's allocations that run.
func decodeAllocs(t *testing.T, n *deptest.Nomad) []string {
	t.Helper()
	var as []struct{ Name, DesiredStatus, ClientStatus string }
	if err := n.Do(t.Context(), http.MethodGet, "/v1/job/switchyard-decode/allocations", nil, &as); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range as {
		if a.DesiredStatus == "run" && a.ClientStatus == "running" {
			names = append(names, a.Name)
		}
	}
	return names
}
