package radix

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"switchyard.dev/libs/kvtier"
)

// The benchmark workload: 2^20 private blocks spread over the workers in
// sequences of seqLen blocks (every fourth sequence offloaded to host
// memory), plus prompts shared system prompts of promptLen blocks, each
// worker holding promptsPerWorker of them. At 512 workers every prompt
// block is held by ~64 workers, so big holder sets are on the hot path.
const (
	benchBlocks      = 1 << 20
	seqLen           = 64
	prompts          = 32
	promptLen        = 16
	promptsPerWorker = 4
	storeBatch       = 16
)

type benchEnv struct {
	ix            *Index
	loadNs        float64 // wall ns per block of the initial bulk load
	names         []string
	next          []uint64 // next sequence number per worker
	queries       [][]uint64
	bytesPerBlock float64
}

func promptChain(p int) []uint64 {
	hs := make([]uint64, promptLen)
	for i := range hs {
		hs[i] = mix(uint64(p)<<32 | uint64(i) | 1<<62)
	}
	return hs
}

func privateChain(w, s int) []uint64 {
	hs := make([]uint64, seqLen)
	for i := range hs {
		hs[i] = mix(uint64(w)<<40 | uint64(s)<<16 | uint64(i))
	}
	return hs
}

func workerPrompt(w, k int) int { return (w*7 + k*5) % prompts }

// newBenchEnv builds the index once per benchmark (the caller keeps it
// across b.Run invocations) and measures its heap footprint.
func newBenchEnv(tb testing.TB, workers int) *benchEnv {
	tb.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	env := &benchEnv{ix: New(), next: make([]uint64, workers)}
	seqs := benchBlocks / workers / seqLen
	var loading time.Duration
	for w := range workers {
		name := fmt.Sprintf("worker-%03d", w)
		env.names = append(env.names, name)
		if err := env.ix.AddWorker(name); err != nil {
			tb.Fatal(err)
		}
		var evs []Event
		for k := range promptsPerWorker {
			evs = append(evs, StoredEvent(kvtier.Device, promptChain(workerPrompt(w, k))...))
		}
		for s := range seqs {
			tier := kvtier.Device
			if s%4 == 3 {
				tier = kvtier.Host
			}
			evs = append(evs, StoredEvent(tier, privateChain(w, s)...))
			if s < 4 {
				q := append(promptChain(workerPrompt(w, s)), privateChain(w, s)...)
				env.queries = append(env.queries, q)
			}
		}
		start := time.Now()
		if err := env.ix.ApplyBatch(name, 0, evs); err != nil {
			tb.Fatal(err)
		}
		loading += time.Since(start)
		env.next[w] = 1
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := env.ix.Stats()
	env.bytesPerBlock = float64(after.HeapAlloc-before.HeapAlloc) / float64(st.Blocks)
	env.loadNs = float64(loading.Nanoseconds()) / float64(st.Holdings)
	if st.Blocks < benchBlocks {
		tb.Fatalf("only %d blocks", st.Blocks)
	}
	return env
}

var benchWorkers = []int{8, 64, 512}

// BenchmarkMatch measures a full-depth match of a 80-block request
// (16 shared prompt blocks, 64 private ones) against ~1M cached blocks.
func BenchmarkMatch(b *testing.B) {
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			env := newBenchEnv(b, workers)
			var r Result
			blocks := 0
			i := 0
			var cpu cpuMeter
			b.ReportAllocs()
			for b.Loop() {
				if i == 0 {
					cpu.start()
				}
				q := env.queries[i%len(env.queries)]
				i++
				env.ix.MatchInto(&r, q)
				blocks += len(q)
			}
			cpu.stop()
			if r.Longest != len(env.queries[(i-1)%len(env.queries)]) {
				b.Fatalf("Longest %d", r.Longest)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(blocks), "ns/block")
			cpu.report(b, blocks)
			b.ReportMetric(env.bytesPerBlock, "B/block")
		})
	}
}

// BenchmarkStored measures applying Stored batches of fresh blocks to an
// index of ~1M blocks, round-robin over the workers. To keep the index
// from growing without bound, every 64K added blocks are removed again
// outside the timer (their cost is reported as removed-ns/block).
func BenchmarkStored(b *testing.B) {
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			env := newBenchEnv(b, workers)
			const window = 4096 // batches
			// Reused buffers, so that the harness itself allocates nothing.
			ring := make([]uint64, window*storeBatch)
			ev := make([]Event, 1)
			var removeTime time.Duration
			removed := 0
			ctr := uint64(0)
			var cpu cpuMeter
			b.ReportAllocs()
			for b.Loop() {
				if ctr == 0 {
					cpu.start()
				}
				w := int(ctr) % workers
				k := int(ctr % window)
				hs := ring[k*storeBatch : (k+1)*storeBatch]
				for j := range hs {
					hs[j] = mix(ctr<<8 | uint64(j) | 1<<63)
				}
				ctr++
				ev[0] = StoredEvent(kvtier.Device, hs...)
				if err := env.ix.ApplyBatch(env.names[w], env.next[w], ev); err != nil {
					b.Fatal(err)
				}
				env.next[w]++
				if k == window-1 {
					b.StopTimer()
					cpu.stop()
					start := time.Now()
					for k := range window {
						w := (int(ctr) - window + k) % workers
						ev[0] = RemovedEvent(kvtier.Device, ring[k*storeBatch:(k+1)*storeBatch]...)
						if err := env.ix.ApplyBatch(env.names[w], env.next[w], ev); err != nil {
							b.Fatal(err)
						}
						env.next[w]++
						removed += storeBatch
					}
					removeTime += time.Since(start)
					cpu.start()
					b.StartTimer()
				}
			}
			cpu.stop()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int(ctr)*storeBatch), "ns/block")
			cpu.report(b, int(ctr)*storeBatch)
			if removed > 0 {
				b.ReportMetric(float64(removeTime.Nanoseconds())/float64(removed), "removed-ns/block")
			}
			b.ReportMetric(env.bytesPerBlock, "B/block")
			b.ReportMetric(env.loadNs, "bulk-load-ns/block")
			st := env.ix.Stats()
			b.ReportMetric(16*float64(st.Slots)/float64(st.Blocks), "end-slot-B/block")
		})
	}
}

// cpuMeter accumulates process CPU time over the timed parts of a benchmark.
type cpuMeter struct {
	total, since time.Duration
	running, ok  bool
}

func (c *cpuMeter) start() {
	c.since, c.ok = cpuNow()
	c.running = c.ok
}

func (c *cpuMeter) stop() {
	if now, ok := cpuNow(); ok && c.running {
		c.total += now - c.since
	}
	c.running = false
}

// report adds the cpu-ns/block metric: CPU time (all threads, GC included)
// per block, which oversubscribed machines inflate much less than wall time.
func (c *cpuMeter) report(b *testing.B, blocks int) {
	if c.ok && blocks > 0 {
		b.ReportMetric(float64(c.total.Nanoseconds())/float64(blocks), "cpu-ns/block")
	}
}

// BenchmarkMatchWhileWriting runs Matches on every core while one
// goroutine keeps applying Stored and Removed batches: readers take no
// lock, so their cost should stay close to BenchmarkMatch.
func BenchmarkMatchWhileWriting(b *testing.B) {
	env := newBenchEnv(b, 64)
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		hs := make([]uint64, storeBatch)
		ev := make([]Event, 1)
		for ctr := uint64(0); ; ctr++ {
			select {
			case <-stop:
				return
			default:
			}
			w := int(ctr) % len(env.names)
			for j := range hs {
				hs[j] = mix(ctr<<8 | uint64(j) | 1<<62)
			}
			ev[0] = StoredEvent(kvtier.Device, hs...)
			_ = env.ix.ApplyBatch(env.names[w], env.next[w], ev)
			ev[0] = RemovedEvent(kvtier.Device, hs...)
			_ = env.ix.ApplyBatch(env.names[w], env.next[w]+1, ev)
			env.next[w] += 2
		}
	}()
	var blocks atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var r Result
		n, i := 0, 0
		for pb.Next() {
			q := env.queries[i%len(env.queries)]
			i++
			env.ix.MatchInto(&r, q)
			n += len(q)
		}
		blocks.Add(int64(n))
	})
	b.StopTimer()
	close(stop)
	<-writerDone
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(blocks.Load()), "ns/block")
}
