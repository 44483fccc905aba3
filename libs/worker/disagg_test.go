package worker_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/filedisc"
	"switchyard.dev/libs/worker"
)

// TestDisaggregatedGenerate runs a prefill and a decode worker over real
// RPCs and the tcp transfer backend: a long prompt is prefilled on the
// prefill worker, a short one locally, one with an unreachable prefill
// worker falls back; outputs equal the engine's, the metrics say which
// path each took, and both workers end with no KV blocks held.
func TestDisaggregatedGenerate(t *testing.T) {
	t.Parallel()
	pre := start(t, "prefill", "-seed", "7")
	dec := start(t, "decode", "-seed", "7", "-disagg-threshold-tokens", "32")
	exec, err := llama.NewTinyRandom(llama.Config{}, 7, llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	long := exec.Tokenizer().Encode(strings.Repeat("a long prompt that goes to the prefill worker; ", 4), true, false)
	short := exec.Tokenizer().Encode("short", true, false)
	for _, tc := range []struct {
		prompt  []uint32
		prefill string
	}{
		{long, pre.URL()},
		{short, pre.URL()},
		{exec.Tokenizer().Encode(strings.Repeat("another long prompt, for a prefill worker that is gone; ", 4), true, false), "http://127.0.0.1:1"},
	} {
		want := direct(t, exec, tc.prompt, 16)
		r := req(worker.TinyRandomName, tc.prompt, 16)
		r.Msg.PrefillWorker = tc.prefill
		got, err := collect(t, dec.client, r)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.tokens, want) {
			t.Fatalf("%d-token prompt via %s: %v, want %v", len(tc.prompt), tc.prefill, got.tokens, want)
		}
	}
	body := scrape(t, dec.URL())
	for _, want := range []string{`path="remote"} 1`, `path="local"} 1`, `path="fallback"} 1`,
		"switchyard_worker_ttft_transfer_seconds_bucket", "switchyard_worker_ttft_first_decode_seconds_count",
		"switchyard_worker_ttft_queue_seconds_count", "switchyard_worker_ttft_prefill_seconds_count"} {
		if !strings.Contains(body, want) {
			t.Errorf("decode /metrics lacks %q", want)
		}
	}
	for _, w := range []running{pre, dec} {
		deptest.Eventually(t, 10*time.Second, "KV blocks released", func() bool { return getLoad(t, w).GetKvBlocksUsed() == 0 })
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// With discovery, a prefill worker writes KV only to decode workers listed
// there at the transfer endpoints they published: a decode worker in the
// same discovery gets its long prompt prefilled remotely, one outside it
// is refused and prefills locally, with the same output either way.
func TestDisaggTargetsFromDiscovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	disc := []string{"-discovery", "file", "-discovery-dir", dir}
	pre := start(t, "prefill", append([]string{"-seed", "7"}, disc...)...)
	listed := start(t, "decode", append([]string{"-seed", "7", "-disagg-threshold-tokens", "32"}, disc...)...)
	unlisted := start(t, "decode", "-seed", "7", "-disagg-threshold-tokens", "32")
	exec, err := llama.NewTinyRandom(llama.Config{}, 7, llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := filedisc.New(filedisc.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	deptest.Eventually(t, 10*time.Second, "decode worker registered with its transfer endpoints", func() bool {
		ins, err := reg.Instances(t.Context(), "decode")
		return err == nil && len(ins) == 1 && len(ins[0].Meta[worker.MetaKVTransfer]) == 64 && ins[0].Meta[discovery.MetaPrefixPull] == "1"
	})
	prompt := exec.Tokenizer().Encode(strings.Repeat("a long prompt for the prefill worker, if it trusts us; ", 4), true, false)
	want := direct(t, exec, prompt, 12)
	for _, tc := range []struct {
		name string
		dec  running
		path string
	}{
		{"listed", listed, `path="remote"} 1`},
		{"unlisted", unlisted, `path="fallback"} 1`},
	} {
		r := req(worker.TinyRandomName, prompt, 12)
		r.Msg.PrefillWorker = pre.URL()
		got, err := collect(t, tc.dec.client, r)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.tokens, want) {
			t.Fatalf("%s: %v, want %v", tc.name, got.tokens, want)
		}
		if body := scrape(t, tc.dec.URL()); !strings.Contains(body, tc.path) {
			t.Errorf("%s decode worker's /metrics lacks %s", tc.name, tc.path)
		}
	}
}

// TestPrefixPullGenerate runs two decode workers over real RPCs and the
// tcp transfer backend: one holds a conversation's first turn, the other
// serves the next turn by copying that prefix from it (prefix pull) and
// computing only the rest, with the engine's output; a holder that is
// gone, or one without a transfer agent, only costs the copy.
func TestPrefixPullGenerate(t *testing.T) {
	t.Parallel()
	holder := start(t, "decode", "-seed", "7")
	noAgent := start(t, "decode", "-seed", "7", "-kv-transfer", "none")
	puller := start(t, "decode", "-seed", "7")
	exec, err := llama.NewTinyRandom(llama.Config{}, 7, llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		from   string
		cached bool
		path   string
	}{
		{holder.URL(), true, `path="pulled"} 1`},
		{"http://127.0.0.1:1", false, `path="fallback"} 1`},
		{noAgent.URL(), false, `path="fallback"} 2`},
	} {
		// A conversation of its own: the puller must not hold it already.
		first := exec.Tokenizer().Encode(strings.Repeat(fmt.Sprintf("conversation %d, first turn; ", i), 4), true, false)
		for _, w := range []running{holder, noAgent} {
			if _, err := collect(t, w.client, req(worker.TinyRandomName, first, 1)); err != nil {
				t.Fatal(err)
			}
		}
		next := append(slices.Clone(first), exec.Tokenizer().Encode(" and the next turn", false, false)...)
		want := direct(t, exec, next, 12)
		r := req(worker.TinyRandomName, next, 12)
		r.Msg.PrefixWorker, r.Msg.PrefixBlocks = tc.from, 1000
		got, err := collect(t, puller.client, r)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.tokens, want) {
			t.Fatalf("pulled from %s: %v, want %v", tc.from, got.tokens, want)
		}
		if cached := got.last.GetUsage().GetCachedTokens(); (cached > 0) != tc.cached {
			t.Fatalf("pulled from %s: %d prompt tokens cached", tc.from, cached)
		}
		if body := scrape(t, puller.URL()); !strings.Contains(body, tc.path) {
			t.Errorf("pulled from %s: /metrics lacks %s", tc.from, tc.path)
		}
	}
	if body := scrape(t, puller.URL()); !strings.Contains(body, `switchyard_worker_ttft_transfer_seconds_count{model="`) || !strings.Contains(body, `,path="pulled"} 1`) {
		t.Error("puller's /metrics lacks the pull's transfer time")
	}
	for _, w := range []running{holder, noAgent, puller} {
		deptest.Eventually(t, 10*time.Second, "KV blocks released", func() bool { return getLoad(t, w).GetKvBlocksUsed() == 0 })
	}
}
