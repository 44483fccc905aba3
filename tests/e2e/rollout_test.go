package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/gen/switchyard/planner/v1/plannerv1connect"
	"switchyard.dev/libs/mesh/deptest"
)

// buildVersion builds svc stamped with version into a directory of its
// own: a second release of one service beside the test's others.
func buildVersion(t testing.TB, svc, version string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-ldflags", "-X switchyard.dev/services/"+svc+".Version="+version, "-o", dir+"/",
		"switchyard.dev/services/"+svc+"/cmd/"+svc)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s %s: %v\n%s", svc, version, err, out)
	}
	return dir
}

// servedBy sums the frontend's finished generations per worker version.
func servedBy(t *testing.T, frontend string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range samples(t, "http://"+frontend+"/metrics", "switchyard_frontend_generations_total") {
		out[s.label("worker_version")] += s.value
	}
	return out
}

// TestCanaryRollout runs decode canaries against a baseline of the same
// build stamped with another version, on sim workers: a held weight gives
// the canary its share of 1,000 requests within two points; a canary
// that is slower (a lower -sim-speedup) is aborted by the planner's judge
// and gets no more traffic; a healthy one steps up and is promoted. No
// request fails throughout.
func TestCanaryRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	bin := Build(t)
	slow, good := buildVersion(t, "decode", "0.0.0-slow"), buildVersion(t, "decode", "0.0.0-good")
	dir := t.TempDir()
	common := []string{"-discovery", "file", "-discovery-dir", dir, "-drain-timeout", "2s"}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t)) }
	worker := func(id string, speedup string) []string {
		return append([]string{"-id", id, "-executor", "sim", "-sim-vocab", "512", "-sim-context", "2048", "-sim-speedup", speedup}, common...)
	}
	for i := range 3 {
		Start(t, bin, "decode", addr(), worker(fmt.Sprint("decode-", i), "20")...)
	}
	Start(t, slow, "decode", addr(), worker("decode-slow", "1")...)
	router := Start(t, bin, "router", addr(), append([]string{"-id", "router-0"}, common...)...)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("sk-admin admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fe := Start(t, bin, "frontend", addr(), append([]string{"-id", "frontend-0", "-api-keys-file", keys}, common...)...)
	pl := Start(t, bin, "planner", addr(), append([]string{"-id", "planner-0", "-interval", "500ms",
		"-rollout-min-requests", "20", "-rollout-latency-floor", "2ms"}, common...)...)
	plan := plannerv1connect.NewPlannerServiceClient(http.DefaultClient, "http://"+pl.Addr)

	var failed, sent atomic.Int64
	complete := func(i int) {
		body := fmt.Sprintf(`{"model":"sim","prompt":"request %d of the canary test","max_tokens":4,"temperature":0}`, i)
		req, _ := http.NewRequest(http.MethodPost, "http://"+fe.Addr+"/v1/completions", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer sk-admin")
		res, err := http.DefaultClient.Do(req)
		sent.Add(1)
		if err != nil {
			failed.Add(1)
			t.Errorf("request %d: %v", i, err)
			return
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			failed.Add(1)
			t.Errorf("request %d: %s", i, res.Status)
		}
	}
	burst := func(from, n int) {
		var wg sync.WaitGroup
		next := atomic.Int64{}
		for range 4 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
					complete(from + int(i))
				}
			})
		}
		wg.Wait()
	}
	published := ""
	set := func(version string, weight float64, judge bool) {
		t.Helper()
		mark := strings.Count(router.Log(), "rollouts changed")
		want := fmt.Sprintf("decode=%s@%v", version, weight)
		changed := want != published
		published = want
		// Through the console, as an operator does: the frontend finds the
		// leading planner (before the planner's first step there is none).
		var r struct {
			State string `json:"state"`
		}
		deptest.Eventually(t, 30*time.Second, "the console to set the rollout", func() bool {
			body := fmt.Sprintf(`{"role":"decode","version":%q,"weight":%v,"judge":%v}`, version, weight, judge)
			return postJSON(t, "http://"+fe.Addr+"/console/api/rollout", "sk-admin", body, &r) == http.StatusOK
		})
		if want := map[bool]string{true: "judging", false: "holding"}[judge]; r.State != want {
			t.Fatalf("rollout set in state %q, want %q", r.State, want)
		}
		if changed {
			deptest.Eventually(t, 30*time.Second, "the router and the frontend to follow the rollout", func() bool {
				return strings.Count(router.Log(), "rollouts changed") > mark && strings.Contains(fe.Log(), want)
			})
		}
	}
	burst(0, 20) // the model is listed and every worker warm
	for _, bad := range []struct {
		key, body string
		code      int
	}{
		{"sk-admin", `{"role":"decode","version":"0.0.0-slow","weight":2}`, http.StatusBadRequest},
		{"sk-admin", `{"role":"frontend","version":"0.0.0-slow","weight":0.1}`, http.StatusBadRequest},
		{"sk-admin", `{"role":"prefill","version":"x","weight":0.1,"judge":true}`, http.StatusBadRequest},
		{"sk-admin", `{"role":"decode","version":"0.0.0-slow","weight":0.1,"extra":1}`, http.StatusBadRequest},
		{"", `{"role":"decode","version":"0.0.0-slow","weight":0.1}`, http.StatusUnauthorized},
	} {
		deptest.Eventually(t, 30*time.Second, "the console to refuse "+bad.body, func() bool {
			return postJSON(t, "http://"+fe.Addr+"/console/api/rollout", bad.key, bad.body, nil) == bad.code
		})
	}

	// A held weight: the share holds over 1,000 requests.
	set("0.0.0-slow", 0.1, false)
	before := servedBy(t, fe.Addr)
	t0 := time.Now()
	burst(1000, 1000)
	t.Logf("1,000 requests in %v", time.Since(t0).Round(time.Millisecond))
	after := servedBy(t, fe.Addr)
	canary, total := after["0.0.0-slow"]-before["0.0.0-slow"], 0.0
	for v, n := range after {
		total += n - before[v]
	}
	if share := canary / total; total != 1000 || share < 0.08 || share > 0.12 {
		t.Errorf("held at 0.1: the canary served %.0f of %.0f requests (%.3f)", canary, total, share)
	}
	t.Logf("held at 0.1: canary share %.3f of %.0f requests", canary/total, total)

	// The judge aborts the slow canary.
	rollout := func() *plannerv1.Rollout {
		res, err := plan.GetRollouts(t.Context(), connect.NewRequest(&plannerv1.GetRolloutsRequest{}))
		if err != nil || len(res.Msg.GetRollouts()) != 1 {
			t.Fatalf("rollouts %v, %v", res, err)
		}
		return res.Msg.GetRollouts()[0]
	}
	load := func(ctx context.Context, from int) *sync.WaitGroup {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := from + w; ctx.Err() == nil; i += 4 {
					complete(i)
				}
			})
		}
		return &wg
	}
	set("0.0.0-slow", 0.1, true)
	ctx, stop := context.WithCancel(t.Context())
	wg := load(ctx, 10000)
	start := time.Now()
	deptest.Eventually(t, 60*time.Second, "the judge to end the slow canary's rollout", func() bool { return rollout().GetState() != "judging" })
	stop()
	wg.Wait()
	r := rollout()
	t.Logf("slow canary: %s after %v: %s", r.GetState(), time.Since(start).Round(time.Second), r.GetReason())
	if r.GetState() != "aborted" || r.GetWeight() != 0 {
		t.Fatalf("slow canary: %s at weight %v (%s), want aborted at 0", r.GetState(), r.GetWeight(), r.GetReason())
	}
	deptest.Eventually(t, 30*time.Second, "the router to follow the abort", func() bool {
		return strings.Contains(router.Log(), `rollouts="decode=0.0.0-slow@0"`)
	})
	before = servedBy(t, fe.Addr)
	burst(50000, 200)
	if n := servedBy(t, fe.Addr)["0.0.0-slow"] - before["0.0.0-slow"]; n != 0 {
		t.Errorf("the aborted canary served %.0f of 200 requests", n)
	}

	// A healthy canary steps up and is promoted.
	Start(t, good, "decode", addr(), worker("decode-good", "20")...)
	set("0.0.0-good", 0.1, true)
	ctx, stop = context.WithCancel(t.Context())
	wg = load(ctx, 100000)
	deptest.Eventually(t, 120*time.Second, "the judge to end the healthy canary's rollout", func() bool { return rollout().GetState() != "judging" })
	stop()
	wg.Wait()
	r = rollout()
	t.Logf("healthy canary: %s: %s", r.GetState(), r.GetReason())
	if r.GetState() != "promoted" || r.GetWeight() != 1 {
		t.Errorf("healthy canary: %s at weight %v (%s), want promoted at 1", r.GetState(), r.GetWeight(), r.GetReason())
	}
	if failed.Load() > 0 {
		t.Errorf("%d of %d requests failed", failed.Load(), sent.Load())
	}
}
