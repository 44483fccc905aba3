// Package llama is a pure-Go executor for Llama-architecture models in the
// llama2.c checkpoint format: RMSNorm, RoPE, grouped-query attention over
// the engine's paged KV blocks, SwiGLU, and a batched forward pass whose
// matrix products are weight-stationary over every token of the step.
//
// Arithmetic follows llama2.c run.c operation by operation (same
// accumulation order, float32 throughout), so greedy output reproduces the
// reference. Each token's arithmetic is independent of the other tokens in
// the batch, so results do not depend on batching, chunking or prefix-cache
// hits.
package llama

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
)

// HeaderSize is the llama2.c header: 7 little-endian int32.
const HeaderSize = 28

// ErrCheckpoint is wrapped by every malformed-checkpoint error.
var ErrCheckpoint = errors.New("llama: bad checkpoint")

// Config is the model shape from the checkpoint header.
type Config struct {
	Dim       int
	HiddenDim int
	NLayers   int
	NHeads    int
	NKVHeads  int
	VocabSize int
	SeqLen    int
	// SharedClassifier is true when the header's vocab_size is positive:
	// the classifier reuses the token embedding.
	SharedClassifier bool
}

// Stories260K is the shape of llama2.c's stories260K model, the default for
// tiny random models.
var Stories260K = Config{Dim: 64, HiddenDim: 172, NLayers: 5, NHeads: 8, NKVHeads: 4, VocabSize: 512, SeqLen: 512, SharedClassifier: true}

// HeadSize is Dim / NHeads.
func (c Config) HeadSize() int { return c.Dim / c.NHeads }

// KVDim is the width of one token's K (or V) in one layer.
func (c Config) KVDim() int { return c.Dim * c.NKVHeads / c.NHeads }

// KVBytesPerToken is one token's K and V over all layers, in float32.
func (c Config) KVBytesPerToken() int { return c.NLayers * 2 * c.KVDim() * 4 }

// maxDim bounds every header field so size arithmetic cannot overflow.
const maxDim = 1 << 20

// Validate checks that the shape is usable.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"dim", c.Dim}, {"hidden_dim", c.HiddenDim}, {"n_layers", c.NLayers}, {"n_heads", c.NHeads}, {"n_kv_heads", c.NKVHeads}, {"vocab_size", c.VocabSize}, {"seq_len", c.SeqLen}} {
		if f.v <= 0 || f.v > maxDim {
			return fmt.Errorf("%w: %s = %d out of range (1..%d)", ErrCheckpoint, f.name, f.v, maxDim)
		}
	}
	if c.Dim%c.NHeads != 0 || c.HeadSize()%2 != 0 {
		return fmt.Errorf("%w: dim %d must split into %d heads of even size", ErrCheckpoint, c.Dim, c.NHeads)
	}
	if c.NKVHeads > c.NHeads || c.NHeads%c.NKVHeads != 0 {
		return fmt.Errorf("%w: n_heads %d must be a multiple of n_kv_heads %d", ErrCheckpoint, c.NHeads, c.NKVHeads)
	}
	if c.NumWeights() > 1<<36 {
		return fmt.Errorf("%w: %d weights is implausibly large", ErrCheckpoint, c.NumWeights())
	}
	return nil
}

// ParseHeader decodes and validates the 28-byte header.
func ParseHeader(b []byte) (Config, error) {
	if len(b) < HeaderSize {
		return Config{}, fmt.Errorf("%w: header needs %d bytes, got %d", ErrCheckpoint, HeaderSize, len(b))
	}
	f := func(i int) int { return int(int32(binary.LittleEndian.Uint32(b[4*i:]))) }
	c := Config{Dim: f(0), HiddenDim: f(1), NLayers: f(2), NHeads: f(3), NKVHeads: f(4), VocabSize: f(5), SeqLen: f(6)}
	c.SharedClassifier = c.VocabSize > 0
	if c.VocabSize < 0 {
		c.VocabSize = -c.VocabSize
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// NumWeights is the number of float32 values after the header, including
// the unused freq_cis tables run.c skips.
func (c Config) NumWeights() int64 {
	d, h, l, v, kv := int64(c.Dim), int64(c.HiddenDim), int64(c.NLayers), int64(c.VocabSize), int64(c.KVDim())
	n := v*d + // token embedding
		l*d + l*d*d + 2*l*d*kv + l*d*d + // rms_att, wq, wk, wv, wo
		l*d + 3*l*d*h + // rms_ffn, w1, w2, w3
		d + // rms_final
		int64(c.SeqLen)*int64(c.HeadSize()) // freq_cis_real and _imag, seq_len*head_size/2 each
	if !c.SharedClassifier {
		n += v * d
	}
	return n
}

// FileSize is the exact checkpoint size the header implies.
func (c Config) FileSize() int64 { return HeaderSize + 4*c.NumWeights() }

// Weights holds the parameters. Matrices are stored transposed (in x out,
// row-major) so that the batched product out[t] = x[t] * W streams one
// weight row per input feature across the whole batch.
type Weights struct {
	Embedding []float32 // vocab x dim, row per token
	RMSAtt    []float32 // layers x dim
	WqT       []float32 // layers x dim x dim
	WkT       []float32 // layers x dim x kvdim
	WvT       []float32 // layers x dim x kvdim
	WoT       []float32 // layers x dim x dim
	RMSFFN    []float32 // layers x dim
	W1T       []float32 // layers x dim x hidden
	W2T       []float32 // layers x hidden x dim
	W3T       []float32 // layers x dim x hidden
	RMSFinal  []float32 // dim
	WclsT     []float32 // dim x vocab
}

// Model is a loaded or generated model.
type Model struct {
	Config  Config
	Weights Weights
	Name    string
}

// LoadCheckpoint reads a llama2.c checkpoint.
func LoadCheckpoint(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	m, err := ParseCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.Name = path
	return m, nil
}

// ParseCheckpoint decodes a checkpoint image.
func ParseCheckpoint(data []byte) (*Model, error) {
	c, err := ParseHeader(data)
	if err != nil {
		return nil, err
	}
	if want := c.FileSize(); int64(len(data)) != want {
		return nil, fmt.Errorf("%w: header %+v implies %d bytes, file has %d", ErrCheckpoint, c, want, len(data))
	}
	r := reader{data: data[HeaderSize:]}
	d, h, l, kv := c.Dim, c.HiddenDim, c.NLayers, c.KVDim()
	w := Weights{Embedding: r.next(c.VocabSize * d)}
	w.RMSAtt = r.next(l * d)
	w.WqT = transposeLayers(r.next(l*d*d), l, d, d)
	w.WkT = transposeLayers(r.next(l*d*kv), l, kv, d)
	w.WvT = transposeLayers(r.next(l*d*kv), l, kv, d)
	w.WoT = transposeLayers(r.next(l*d*d), l, d, d)
	w.RMSFFN = r.next(l * d)
	w.W1T = transposeLayers(r.next(l*d*h), l, h, d)
	w.W2T = transposeLayers(r.next(l*h*d), l, d, h)
	w.W3T = transposeLayers(r.next(l*d*h), l, h, d)
	w.RMSFinal = r.next(d)
	r.next(c.SeqLen * c.HeadSize()) // freq_cis_real, freq_cis_imag
	if c.SharedClassifier {
		w.WclsT = transposeLayers(w.Embedding, 1, c.VocabSize, d)
	} else {
		w.WclsT = transposeLayers(r.next(c.VocabSize*d), 1, c.VocabSize, d)
	}
	return &Model{Config: c, Weights: w}, nil
}

type reader struct {
	data []byte
}

func (r *reader) next(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(r.data[4*i:]))
	}
	r.data = r.data[4*n:]
	return out
}

// transposeLayers turns l stacked rows x cols matrices (run.c's out x in)
// into l stacked cols x rows ones.
func transposeLayers(src []float32, l, rows, cols int) []float32 {
	dst := make([]float32, len(src))
	for k := range l {
		s, d := src[k*rows*cols:], dst[k*rows*cols:]
		for i := range rows {
			for j := range cols {
				d[j*rows+i] = s[i*cols+j]
			}
		}
	}
	return dst
}

// NewRandom builds a deterministic random model of shape c from seed: the
// same seed always gives the same weights. Weights are uniform with a
// fan-in scale so activations stay well conditioned; norms are ones.
func NewRandom(c Config, seed uint64) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	u := func(n, fanIn int) []float32 {
		s := float32(1 / math.Sqrt(float64(fanIn)))
		out := make([]float32, n)
		for i := range out {
			out[i] = (2*rng.Float32() - 1) * s
		}
		return out
	}
	ones := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	d, h, l, kv, v := c.Dim, c.HiddenDim, c.NLayers, c.KVDim(), c.VocabSize
	w := Weights{
		Embedding: u(v*d, 1), RMSAtt: ones(l * d),
		WqT: u(l*d*d, d), WkT: u(l*d*kv, d), WvT: u(l*d*kv, d), WoT: u(l*d*d, d),
		RMSFFN: ones(l * d), W1T: u(l*d*h, d), W2T: u(l*h*d, h), W3T: u(l*d*h, d),
		RMSFinal: ones(d),
	}
	if c.SharedClassifier {
		w.WclsT = transposeLayers(w.Embedding, 1, v, d)
	} else {
		w.WclsT = u(d*v, d)
	}
	return &Model{Config: c, Weights: w, Name: fmt.Sprintf("tiny-random-%d", seed)}, nil
}
