package chaos

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// executor is the workers' engine: stories260K through the llama
// executor is light enough for the whole stack on two cores, and gives
// real greedy text to compare.
const executor = "llama"

func stackConfig() Config {
	return Config{Frontends: 2, Routers: 2, Decode: 3, Executor: executor, DisaggThreshold: 32, DecodeBlocks: 64}
}

// startLoad starts the stack and records the reference texts.
func startLoad(t *testing.T) (*Stack, *Load) {
	t.Helper()
	s := StartStack(t, stackConfig())
	var fes []string
	for _, f := range s.Frontends {
		fes = append(fes, f.Addr)
	}
	l := NewLoad(fes, s.Model)
	if err := l.Reference(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s, l
}

// TestChaos is `make chaos`: every fault of FullSuite in turn; the table
// goes to $CHAOS_OUT (default results/chaos-<date>.md).
func TestChaos(t *testing.T) {
	if os.Getenv("SWITCHYARD_CHAOS") != "1" {
		t.Skip("the full chaos suite runs with SWITCHYARD_CHAOS=1 (make chaos)")
	}
	s, l := startLoad(t)
	results := Run(t, s, l, FullSuite(), RunOpts{Clients: 6, Before: 5 * time.Second, After: 10 * time.Second})
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Chaos run %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Stack: %s; executor %s on stories260K. Machine: %d CPUs, %s.\n\n", describe(stackConfig()), executor, runtime.NumCPU(), cpuModel())
	WriteTable(&b, results)
	verdict := Verdict(results)
	fmt.Fprintf(&b, "\nGoals missed: %d\n", len(verdict))
	for _, v := range verdict {
		fmt.Fprintf(&b, "- %s\n", v)
	}
	out := os.Getenv("CHAOS_OUT")
	if out == "" {
		out = filepath.Join("..", "..", "results", "chaos-"+time.Now().UTC().Format("2006-01-02")+".md")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report in %s:\n%s", out, b.String())
	for _, v := range verdict {
		t.Error(v)
	}
}

// TestChaosShort is the chaos run of `make test`: a router kill, a decode
// worker kill and a Redis stop under load lose no request, and leave the
// indexes matching the workers.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack; skipped under -short")
	}
	if os.Getenv("SWITCHYARD_CHAOS") == "1" {
		t.Skip("TestChaos runs the full suite")
	}
	s, l := startLoad(t)
	results := Run(t, s, l, ShortSuite(), RunOpts{Clients: 4, Before: 2 * time.Second, After: 4 * time.Second})
	var b bytes.Buffer
	WriteTable(&b, results)
	t.Logf("\n%s", b.String())
	for _, v := range Verdict(results) {
		t.Error(v)
	}
}

func describe(c Config) string {
	return fmt.Sprintf("%d frontends, %d routers (kv mode), 1 prefill and %d decode workers (%d KV blocks each; disaggregation above %d uncached prompt tokens), kvbm-controller, planner, Consul dev agent, redis-server",
		c.Frontends, c.Routers, c.Decode, c.DecodeBlocks, c.DisaggThreshold)
}

// cpuModel is the first "model name" of /proc/cpuinfo, for the report.
func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
