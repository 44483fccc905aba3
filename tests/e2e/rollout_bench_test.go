package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/gen/switchyard/planner/v1/plannerv1connect"
	"switchyard.dev/libs/mesh/deptest"
)

// BenchmarkIdenticalCanaryRollouts rolls out, b.N times, a decode canary
// that is the baseline's own build stamped with another version, under
// steady load, with the planner's judge at its default criteria: every
// abort is a false one. It reports false aborts per rollout and the
// seconds a rollout takes to promote. The goal: at most one false abort
// in 20 rollouts (-benchtime 20x).
func BenchmarkIdenticalCanaryRollouts(b *testing.B) {
	bin := Build(b)
	same := buildVersion(b, "decode", "0.0.0-same")
	dir := b.TempDir()
	common := []string{"-discovery", "file", "-discovery-dir", dir, "-drain-timeout", "2s"}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(b)) }
	worker := func(id string) []string {
		return append([]string{"-id", id, "-executor", "sim", "-sim-vocab", "512", "-sim-context", "2048", "-sim-speedup", "20"}, common...)
	}
	for i := range 3 {
		Start(b, bin, "decode", addr(), worker(fmt.Sprint("decode-", i))...)
	}
	Start(b, same, "decode", addr(), worker("decode-same")...)
	Start(b, bin, "router", addr(), append([]string{"-id", "router-0"}, common...)...)
	fe := Start(b, bin, "frontend", addr(), append([]string{"-id", "frontend-0"}, common...)...)
	pl := Start(b, bin, "planner", addr(), append([]string{"-id", "planner-0", "-interval", "500ms"}, common...)...)
	plan := plannerv1connect.NewPlannerServiceClient(http.DefaultClient, "http://"+pl.Addr)

	complete := func(i int) {
		body := fmt.Sprintf(`{"model":"sim","prompt":"rollout benchmark request %d","max_tokens":4,"temperature":0}`, i)
		res, err := http.Post("http://"+fe.Addr+"/v1/completions", "application/json", bytes.NewBufferString(body))
		if err != nil {
			return // counted by the judge as what it is; the loop goes on
		}
		res.Body.Close()
	}
	deptest.Eventually(b, 60*time.Second, "the mesh to serve", func() bool {
		res, err := http.Post("http://"+fe.Addr+"/v1/completions", "application/json",
			bytes.NewBufferString(`{"model":"sim","prompt":"warm","max_tokens":1}`))
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	state := func() (string, string) {
		res, err := plan.GetRollouts(b.Context(), connect.NewRequest(&plannerv1.GetRolloutsRequest{}))
		if err != nil || len(res.Msg.GetRollouts()) == 0 {
			return "", fmt.Sprint(err)
		}
		r := res.Msg.GetRollouts()[0]
		return r.GetState(), r.GetReason()
	}
	aborts, n := 0, 0
	var took time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		deptest.Eventually(b, 30*time.Second, "the planner to accept the rollout", func() bool {
			_, err := plan.SetRollout(b.Context(), connect.NewRequest(&plannerv1.SetRolloutRequest{Role: "decode", Version: "0.0.0-same", Weight: 0.1, Judge: true}))
			return err == nil
		})
		ctx, stop := context.WithCancel(b.Context())
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for j := w; ctx.Err() == nil; j += 4 {
					complete(i*1_000_000 + j)
				}
			})
		}
		var st, reason string
		deptest.Eventually(b, 120*time.Second, "the judge to end the rollout", func() bool {
			st, reason = state()
			return st == "promoted" || st == "aborted"
		})
		stop()
		wg.Wait()
		n++
		took += time.Since(start)
		if st == "aborted" {
			aborts++
			b.Logf("rollout %d: false abort: %s", i, reason)
		}
	}
	b.ReportMetric(float64(aborts)/float64(n), "false-aborts/rollout")
	b.ReportMetric(took.Seconds()/float64(n), "s/rollout")
	b.Logf("%d of %d identical rollouts aborted", aborts, n)
}
