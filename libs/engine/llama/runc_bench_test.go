package llama

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/sharedtest"
)

// Flags for BenchmarkRunCWorkload, set by scripts/runc-compare.sh to the
// values it gives run.c (-i, -n) and to collect the text for comparison.
var (
	runcPrompt = flag.String("runc.prompt", "Once upon a time", "BenchmarkRunCWorkload: prompt (run.c -i)")
	runcSteps  = flag.Int("runc.steps", 256, "BenchmarkRunCWorkload: positions to run, BOS and prompt included (run.c -n)")
	runcOut    = flag.String("runc.out", "", "BenchmarkRunCWorkload: write each kernel's text, as run.c prints it, to `dir`/<kernel>.txt")
)

// BenchmarkRunCWorkload runs llama2.c run.c's generation loop (run.c
// stories260K.bin -z tok512.bin -t 0 -n steps -i prompt) on the real model,
// step for step: one forward per position, BOS at position 0, each prompt
// position alone with its logits computed and discarded (the next prompt
// token is forced), then greedy decode until steps positions or BOS. Each
// step's piece is appended to the text as run.c prints it. The tok/s metric
// is run.c's "achieved tok/s": the clock starts after the first forward, and
// it counts the positions after it (steps-1 when BOS never comes).
func BenchmarkRunCWorkload(b *testing.B) {
	dir := sharedtest.Path(b, sharedtest.Stories260K) // the run.c workload needs its tokenizer
	for _, k := range []Kernel{KernelSIMD, KernelGo} {
		b.Run(k.String(), func(b *testing.B) {
			e, err := Open(filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin"), Options{Kernel: k})
			if err != nil {
				b.Fatal(err)
			}
			g := newRunCGen(b, e, *runcPrompt, *runcSteps)
			var text []byte
			var timed time.Duration
			var counted int
			for b.Loop() {
				n, d := g.run(b)
				counted += n
				timed += d
				text = g.text
			}
			if counted > 0 {
				b.ReportMetric(float64(counted)/timed.Seconds(), "tok/s")
			}
			got := strings.TrimSuffix(string(text), "\n")
			if n := min(len(got), len(storiesRef)); *runcPrompt == "Once upon a time" && got[:n] != storiesRef[:n] {
				b.Fatalf("text differs from run.c's reference:\n got: %q\nwant: %q", text, storiesRef)
			}
			if *runcOut != "" {
				if err := os.WriteFile(filepath.Join(*runcOut, k.String()+".txt"), text, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// runcGen holds one sequence's state for run.c's loop, reused across runs
// so a run allocates nothing but the text pieces.
type runcGen struct {
	e      *Executor
	prompt []uint32 // BOS, then the encoded prompt
	steps  int
	tokens []uint32
	bt     executor.Batch
	text   []byte
}

func newRunCGen(tb testing.TB, e *Executor, prompt string, steps int) *runcGen {
	tb.Helper()
	if steps <= 0 || steps > e.c.SeqLen {
		steps = e.c.SeqLen // run.c's clamp
	}
	blocks := make([]int, (e.c.SeqLen+15)/16)
	for i := range blocks {
		blocks[i] = i
	}
	bind(tb, e, len(blocks))
	g := &runcGen{e: e, prompt: e.tok.Encode(prompt, true, false), steps: steps, tokens: make([]uint32, 0, steps)}
	g.bt.Items = []executor.Item{{Blocks: blocks}}
	return g
}

// run generates once, leaving the text in g.text, and returns what run.c
// would time: the positions after the first and the time they took.
func (g *runcGen) run(tb testing.TB) (int, time.Duration) {
	g.tokens = append(g.tokens[:0], g.prompt[0])
	g.text = g.text[:0]
	it := &g.bt.Items[0]
	var start time.Time
	pos := 0
	for pos < g.steps {
		// Like run.c, every position computes logits, prompt ones too.
		it.Tokens, it.Start, it.End, it.Sample = g.tokens[:pos+1], pos, pos+1, true
		if err := g.e.Execute(tb.Context(), &g.bt); err != nil {
			tb.Fatal(err)
		}
		next := it.Out
		if pos+1 < len(g.prompt) {
			next = g.prompt[pos+1]
		}
		pos++
		if next == tokenizer.BOS {
			break
		}
		g.text = append(g.text, g.e.tok.Piece(g.tokens[pos-1], next)...)
		g.tokens = append(g.tokens, next)
		if start.IsZero() {
			start = time.Now()
		}
	}
	g.text = append(g.text, '\n')
	if pos <= 1 {
		return 0, 0
	}
	return pos - 1, time.Since(start)
}
