package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/openai/openai-go/v3"

	"switchyard.dev/libs/mesh/deptest"
)

// BenchmarkNomadScaleUpToServing measures what a planner's scale-up costs
// through Nomad, from the job scale call (the planner's decision; its
// interval adds the time to see the breach) to the new decode worker
// passing in Consul, and to it serving traffic: a greedy completion sent
// through the frontend and a round-robin router generated tokens on it.
// Each iteration scales the decode group 1→2, then back to 1 (untimed).
//
//	NOMAD_BIN=… CONSUL_BIN=… go test -run '^$' -bench NomadScaleUpToServing -benchtime 5x ./tests/e2e
func BenchmarkNomadScaleUpToServing(b *testing.B) {
	model, tok := StoriesModel(b)
	bin := Build(b)
	consul := deptest.StartConsul(b)
	nomad := deptest.StartNomad(b, consul.Addr)
	common := []string{"-discovery", "consul", "-consul-addr", consul.Addr, "-drain-timeout", "5s"}
	if err := nomad.Do(b.Context(), "POST", "/v1/jobs", decodeJob(bin, model, tok, common), nil); err != nil {
		b.Fatal(err)
	}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(b)) }
	Start(b, bin, "router", addr(), append([]string{"-id", "router-0", "-mode", "round-robin"}, common...)...)
	m := &Mesh{Frontend: Start(b, bin, "frontend", addr(), append([]string{"-id", "frontend-0"}, common...)...)}
	cc, err := api.NewClient(&api.Config{Address: consul.Addr})
	if err != nil {
		b.Fatal(err)
	}
	waitDecoders(b, cc, 1)
	c := client(m)
	id := waitModelB(b, c)

	var inConsul, serving []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		waitNomadDeployed(b, nomad)
		b.StartTimer()
		start := time.Now()
		if err := scaleDecode(b, nomad, 2); err != nil {
			b.Fatal(err)
		}
		var added string
		for _, e := range waitDecoders(b, cc, 2) {
			if strings.HasSuffix(e.Service.ID, "decode-1") {
				added = fmt.Sprintf("http://%s:%d/metrics", e.Service.Address, e.Service.Port)
			}
		}
		inConsul = append(inConsul, time.Since(start))
		if added == "" {
			b.Fatal("no decode-1 in Consul after the scale-up")
		}
		for deadline := time.Now().Add(2 * time.Minute); ; {
			if time.Now().After(deadline) {
				b.Fatal("the added worker served nothing within 2 minutes")
			}
			if _, err := c.Completions.New(b.Context(), openai.CompletionNewParams{
				Model:  openai.CompletionNewParamsModel(id),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(4), Temperature: openai.Float(0),
			}); err != nil {
				b.Fatal(err)
			}
			if n, err := metricValue(added, "switchyard_worker_generated_tokens_total"); err == nil && n > 0 {
				break
			}
		}
		serving = append(serving, time.Since(start))
		b.StopTimer()
		if err := waitScaleAccepted(b, nomad, 1); err != nil {
			b.Fatal(err)
		}
		waitDecoders(b, cc, 1)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(p50(inConsul).Seconds(), "s-to-consul-p50")
	b.ReportMetric(p50(serving).Seconds(), "s-to-serving-p50")
	b.ReportMetric(0, "ns/op")
}

// waitScaleAccepted scales the decode group to n once Nomad accepts it
// (it refuses while the previous deployment runs).
func waitScaleAccepted(b *testing.B, n *deptest.Nomad, count int) error {
	waitNomadDeployed(b, n)
	return scaleDecode(b, n, count)
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
