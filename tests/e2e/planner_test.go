package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
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
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/gen/switchyard/planner/v1/plannerv1connect"
	supervisorv1 "switchyard.dev/gen/switchyard/supervisor/v1"
	"switchyard.dev/gen/switchyard/supervisor/v1/supervisorv1connect"
	"switchyard.dev/libs/mesh/deptest"
)

// The planner scales a decode pool of sim workers through the local
// supervisor: a load that breaks the TTFT target makes it add replicas,
// which serve; once the load is gone it removes them, one per interval
// after the lower desire lasted; no request fails meanwhile. The profile
// it plans with is measured by `planner profile` on the first worker.
func TestPlannerScalesThroughSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	bin, dir := Build(t), t.TempDir()
	disc := filepath.Join(dir, "discovery")
	common := []string{"-discovery", "file", "-discovery-dir", disc, "-drain-timeout", "5s"}
	decode, router, frontend, planner, supAddr := consecutivePorts(t, 4), deptest.FreePort(t), deptest.FreePort(t), deptest.FreePort(t), fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t))
	ready := map[string]any{"http": "http://127.0.0.1:{port}/health"}
	cmd := func(svc string, args ...string) []string {
		return append(append([]string{filepath.Join(bin, svc)}, common...), append(args, "-id", "{id}", "-listen", "127.0.0.1:{port}")...)
	}
	worker := []string{"-executor", "sim", "-sim-vocab", "512", "-sim-context", "4096"}
	prof := filepath.Join(dir, "profile.json")
	spec := map[string]any{"logs": filepath.Join(dir, "logs"), "stop_timeout": "10s", "pools": []map[string]any{
		{"name": "decode", "count": 1, "scalable": true, "min": 1, "max": 4, "port": decode, "ready": ready, "command": cmd("decode", worker...)},
		{"name": "router", "port": router, "ready": ready, "command": cmd("router", "-mode", "least-loaded")},
		{"name": "frontend", "port": frontend, "ready": ready, "command": cmd("frontend")},
	}}
	sup := startSpec(t, bin, dir, supAddr, spec)
	deptest.Eventually(t, 60*time.Second, "the stack up", func() bool { return strings.Contains(sup.Log(), "stack up") })

	out, err := exec.Command(filepath.Join(bin, "planner"), "profile", "-worker", fmt.Sprintf("http://127.0.0.1:%d", decode),
		"-out", prof, "-executor", "sim", "-inputs", "64,256,1024", "-batches", "1,4,16", "-contexts", "512", "-tries", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("planner profile: %v\n%s", err, out)
	}
	pl := Start(t, bin, "planner", fmt.Sprintf("127.0.0.1:%d", planner), append(common, "-id", "planner-0", "-profile", prof,
		"-actuator", "supervisor", "-supervisor-url", "http://"+supAddr, "-interval", "1s", "-ttft-target", "150ms", "-itl-target", "100ms",
		"-min-decode", "1", "-max-decode", "4", "-down-stable", "2", "-down-cooldown", "3s", "-predictor", "constant")...)
	plan := plannerv1connect.NewPlannerServiceClient(http.DefaultClient, "http://"+pl.Addr)
	api := supervisorv1connect.NewSupervisorServiceClient(http.DefaultClient, "http://"+supAddr)
	live := func() int {
		res, err := api.ListInstances(t.Context(), connect.NewRequest(&supervisorv1.ListInstancesRequest{Pool: "decode"}))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, in := range res.Msg.Instances {
			if in.State != supervisorv1.InstanceState_INSTANCE_STATE_DRAINING {
				n++
			}
		}
		return n
	}

	c := openai.NewClient(option.WithBaseURL(fmt.Sprintf("http://127.0.0.1:%d/v1/", frontend)), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	id := waitModel(t, c)
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				prompt := make([]int64, 768)
				for i := range prompt {
					prompt[i] = int64(3 + rng.IntN(500))
				}
				sent.Add(1)
				s := c.Completions.NewStreaming(t.Context(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(id),
					Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: prompt}, MaxTokens: openai.Int(16)},
					option.WithJSONSet("ignore_eos", true))
				for s.Next() {
				}
				if err := s.Err(); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	deptest.Eventually(t, 60*time.Second, "the planner adds decode replicas under load", func() bool { return live() >= 2 })
	res, err := plan.GetPlan(t.Context(), connect.NewRequest(&plannerv1.GetPlanRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Msg.Leader || len(res.Msg.Pools) == 0 {
		t.Fatalf("plan %+v: want this planner leading, with a decode pool", res.Msg)
	}
	t.Logf("plan under load: %s", res.Msg.Pools[0].GetReason())
	deptest.Eventually(t, 30*time.Second, "a scale-up measured serving", func() bool {
		return metricSum(t, "http://"+pl.Addr+"/metrics", "switchyard_planner_scale_up_seconds_count") >= 1
	})
	close(stop)
	wg.Wait()
	var last string
	deptest.Eventually(t, 150*time.Second, "the planner scales back to one replica", func() bool {
		if res, err := plan.GetPlan(t.Context(), connect.NewRequest(&plannerv1.GetPlanRequest{})); err == nil && len(res.Msg.Pools) > 0 {
			if r := res.Msg.Pools[0].GetReason(); r != last {
				last = r
				t.Logf("plan: desired %d: %s", res.Msg.Pools[0].GetDesired(), r)
			}
		}
		return live() == 1
	})
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed while the pool scaled; first: %v", n, sent.Load(), firstErr.Load())
	}
	t.Logf("%d requests, none failed; scale-up to serving: %.2fs summed over %v scale-ups", sent.Load(),
		metricSum(t, "http://"+pl.Addr+"/metrics", "switchyard_planner_scale_up_seconds_sum"),
		metricSum(t, "http://"+pl.Addr+"/metrics", "switchyard_planner_scale_up_seconds_count"))
}

// startSpec writes spec and runs the supervisor on it, printing "stack
// up" once ready.
func startSpec(t *testing.T, bin, dir, addr string, spec map[string]any) *Proc {
	t.Helper()
	spec["banner"] = "stack up\n"
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "stack.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return Start(t, bin, "supervisor", addr, "-spec", path)
}
