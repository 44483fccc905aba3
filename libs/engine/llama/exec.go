package llama

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/tokenizer"
)

// Options tune an Executor.
type Options struct {
	Kernel Kernel
	// Threads caps the goroutines that compute attention for a batch's
	// rows in parallel; default GOMAXPROCS. Results do not depend on it.
	Threads int
	// Name overrides the model name reported to clients.
	Name string
}

// Executor runs a Model over the engine's paged KV cache. Execute is
// called from one goroutine at a time (the engine loop).
type Executor struct {
	m    *Model
	c    Config
	tok  tokenizer.Tokenizer
	name string
	mm   matmul
	exp  func([]float32)
	// threads bounds the goroutines of a step; a step splits only with
	// at least parallelMACs multiply-adds per layer and thread.
	threads      int
	parallelMACs int

	kv          []float32 // the arena viewed as float32
	blockSize   int
	blockFloats int
	cos, sin    []float32 // [pos][headSize/2]
	// With the strip kernel (KernelSIMD on AVX2+FMA), every matrix packed
	// for it (strips.go); nil otherwise.
	packed    []layerStrips
	clsStrips *strips
	// simd: the AVX2+FMA kernels run attention and its softmax
	// (attn_amd64.s); set by Bind when the strip kernel is in use (packed)
	// and the head size and block size allow.
	simd bool

	s scratch
}

// simdExp reports whether SwiGLU's exponentials take the AVX2+FMA expf8:
// whenever the strip kernel is in use. Unlike attention it needs no
// particular head or block size, so SwiGLU is the same arithmetic at
// every block size.
func (e *Executor) simdExp() bool { return e.packed != nil }

// New returns an executor for m that decodes with tok (which must cover the
// model's vocabulary).
func New(m *Model, tok tokenizer.Tokenizer, opts Options) (*Executor, error) {
	if tok == nil {
		return nil, fmt.Errorf("llama: nil tokenizer")
	}
	if tok.VocabSize() < m.Config.VocabSize {
		return nil, fmt.Errorf("llama: tokenizer has %d ids, model %d", tok.VocabSize(), m.Config.VocabSize)
	}
	e := &Executor{m: m, c: m.Config, tok: tok, name: m.Name, mm: opts.Kernel.matmul(), exp: opts.Kernel.expInPlace(), threads: opts.Threads}
	if e.threads <= 0 {
		e.threads = runtime.GOMAXPROCS(0)
	}
	e.parallelMACs = minParallelMACs
	if opts.Name != "" {
		e.name = opts.Name
	}
	e.cos, e.sin = ropeTables(m.Config)
	if opts.Kernel == KernelSIMD && hasFMAKernel {
		e.packed, e.clsStrips = packLayers(m)
	}
	return e, nil
}

// Open loads a llama2.c checkpoint and its tokenizer.bin.
func Open(checkpoint, tokenizerPath string, opts Options) (*Executor, error) {
	m, err := LoadCheckpoint(checkpoint)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.LoadBPEFile(tokenizerPath, m.Config.VocabSize)
	if err != nil {
		return nil, err
	}
	return New(m, tok, opts)
}

// NewTinyRandom returns an executor for a deterministic random model of
// shape c (Stories260K if zero) with a byte tokenizer.
func NewTinyRandom(c Config, seed uint64, opts Options) (*Executor, error) {
	if c == (Config{}) {
		c = Stories260K
	}
	m, err := NewRandom(c, seed)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.NewBytes(c.VocabSize)
	if err != nil {
		return nil, err
	}
	return New(m, tok, opts)
}

// ropeTables precomputes run.c's rotation: for head dimension pair i,
// freq = 1 / 10000^(i/head_size) and angle = pos * freq, in float32.
func ropeTables(c Config) (cos, sin []float32) {
	hs := c.HeadSize()
	half := hs / 2
	cos = make([]float32, c.SeqLen*half)
	sin = make([]float32, c.SeqLen*half)
	for j := range half {
		hd := float32(2*j) / float32(hs)
		freq := 1 / float32(math.Pow(10000, float64(hd)))
		for pos := range c.SeqLen {
			val := float32(pos) * freq
			cos[pos*half+j] = float32(math.Cos(float64(val)))
			sin[pos*half+j] = float32(math.Sin(float64(val)))
		}
	}
	return cos, sin
}

// Model implements executor.Executor.
func (e *Executor) Model() executor.Model {
	return executor.Model{
		Name:            e.name,
		VocabSize:       e.c.VocabSize,
		ContextLen:      e.c.SeqLen,
		BOS:             e.tok.BOS(),
		EOS:             e.tok.EOS(),
		StopTokens:      []uint32{e.tok.EOS(), e.tok.BOS()},
		KVBytesPerToken: e.c.KVBytesPerToken(),
		Logits:          true,
	}
}

// Tokenizer implements executor.Executor.
func (e *Executor) Tokenizer() tokenizer.Tokenizer { return e.tok }

// Config returns the model shape.
func (e *Executor) Config() Config { return e.c }

// Bind implements executor.Executor. Block layout: for each layer l, K
// then V, each BlockSize rows of KVDim float32:
// offset(l, kv, slot) = ((l*2 + kv)*BlockSize + slot) * KVDim.
func (e *Executor) Bind(kv executor.KV) error {
	want := kv.BlockSize * e.c.KVBytesPerToken()
	if kv.BlockBytes != want || len(kv.Arena) < kv.NumBlocks*want || kv.BlockSize <= 0 {
		return fmt.Errorf("llama: KV blocks of %d bytes (arena %d) do not match %d tokens x %d bytes", kv.BlockBytes, len(kv.Arena), kv.BlockSize, e.c.KVBytesPerToken())
	}
	if len(kv.Arena) > 0 {
		e.kv = unsafe.Slice((*float32)(unsafe.Pointer(&kv.Arena[0])), len(kv.Arena)/4)
	}
	e.blockSize, e.blockFloats = kv.BlockSize, want/4
	// The kernels work on 8 positions and 8 head dimensions at a time and
	// may read (never use) K rows past the sequence's end in its last
	// block: that stays inside the block when blocks hold a multiple of 8.
	e.simd = e.clsStrips != nil && e.c.HeadSize()%8 == 0 && kv.BlockSize%8 == 0
	return nil
}

// kvRow returns the K (which=0) or V (which=1) row of position pos in layer
// l for a sequence with block table blocks.
func (e *Executor) kvRow(blocks []int, l, which, pos int) []float32 {
	kvd := e.c.KVDim()
	off := blocks[pos/e.blockSize]*e.blockFloats + ((l*2+which)*e.blockSize+pos%e.blockSize)*kvd
	return e.kv[off : off+kvd : off+kvd]
}

// Execute implements executor.Executor.
func (e *Executor) Execute(ctx context.Context, b *executor.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.blockSize == 0 {
		return fmt.Errorf("llama: Execute before Bind")
	}
	if err := e.plan(b); err != nil {
		return err
	}
	if e.s.workers > 1 {
		e.s.crew = startCrew(e.s.workers)
		defer func() { e.s.crew.stop(); e.s.crew = nil }()
	}
	for l := range e.c.NLayers {
		e.layer(b, l)
	}
	e.classify(b)
	return nil
}
