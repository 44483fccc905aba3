package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/sharedtest"
)

// file is a parsed GGUF file, read independently of the writer's code.
type file struct {
	version uint32
	kv      map[string]any
	tensors map[string]tensorInfo
	data    []byte // from the aligned start of tensor data
}

type tensorInfo struct {
	dims []uint64
	typ  uint32
	off  uint64
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errors.New("truncated")
		return make([]byte, n%64)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u32() uint32 {
	p := r.take(4)
	if len(p) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}

func (r *reader) u64() uint64 {
	p := r.take(8)
	if len(p) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

func (r *reader) str() string { return string(r.take(r.u64())) }

func (r *reader) scalar(t ValueType) any {
	switch t {
	case TypeUint32:
		return r.u32()
	case TypeInt32:
		return int32(r.u32())
	case TypeFloat32:
		return math.Float32frombits(r.u32())
	case TypeBool:
		return r.take(1)[0] != 0
	case TypeString:
		return r.str()
	case TypeUint64:
		return r.u64()
	}
	r.err = fmt.Errorf("type %d", t)
	return nil
}

func parse(b []byte) (*file, error) {
	r := &reader{b: b}
	if r.u32() != magic {
		return nil, errors.New("no magic")
	}
	f := &file{version: r.u32(), kv: map[string]any{}, tensors: map[string]tensorInfo{}}
	nt, nkv := r.u64(), r.u64()
	for range nkv {
		k := r.str()
		t := ValueType(r.u32())
		if t != TypeArray {
			f.kv[k] = r.scalar(t)
			continue
		}
		et, n := ValueType(r.u32()), r.u64()
		arr := make([]any, 0, n)
		for range n {
			arr = append(arr, r.scalar(et))
		}
		f.kv[k] = arr
	}
	for range nt {
		name := r.str()
		dims := make([]uint64, r.u32())
		for i := range dims {
			dims[i] = r.u64()
		}
		f.tensors[name] = tensorInfo{dims: dims, typ: r.u32(), off: r.u64()}
	}
	if r.err != nil {
		return nil, r.err
	}
	start := uint64(len(b) - len(r.b))
	f.data = b[align(start):]
	return f, nil
}

// values returns tensor name's float32 values.
func (f *file) values(t *testing.T, name string) ([]uint64, []float32) {
	t.Helper()
	ti, ok := f.tensors[name]
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	if ti.typ != TensorF32 || ti.off%Alignment != 0 {
		t.Fatalf("tensor %q: type %d offset %d", name, ti.typ, ti.off)
	}
	n := uint64(1)
	for _, d := range ti.dims {
		n *= d
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(f.data[ti.off+uint64(4*i):]))
	}
	return ti.dims, out
}

func loadStories(t *testing.T) ([]byte, *tokenizer.BPE) {
	t.Helper()
	dir := sharedtest.Path(t, sharedtest.Stories260K)
	ckpt, err := os.ReadFile(filepath.Join(dir, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadBPEFile(filepath.Join(dir, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	return ckpt, tok
}

func TestConvertStories260K(t *testing.T) {
	ckpt, tok := loadStories(t)
	var buf bytes.Buffer
	if err := ConvertLlama2c(&buf, ckpt, tok, "stories260K"); err != nil {
		t.Fatal(err)
	}
	f, err := parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	m, err := llama.ParseCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if f.version != Version {
		t.Errorf("version %d", f.version)
	}
	for k, want := range map[string]any{
		"general.architecture":          "llama",
		"llama.context_length":          uint32(512),
		"llama.embedding_length":        uint32(64),
		"llama.feed_forward_length":     uint32(172),
		"llama.block_count":             uint32(5),
		"llama.attention.head_count":    uint32(8),
		"llama.attention.head_count_kv": uint32(4),
		"llama.rope.dimension_count":    uint32(8),
		"tokenizer.ggml.model":          "llama",
		"tokenizer.ggml.bos_token_id":   uint32(1),
		"tokenizer.ggml.eos_token_id":   uint32(2),
	} {
		if got := f.kv[k]; got != want {
			t.Errorf("%s = %v (%T), want %v", k, got, got, want)
		}
	}
	if got := len(f.tensors); got != 3+9*c.NLayers {
		t.Errorf("%d tensors", got)
	}
	toks := f.kv["tokenizer.ggml.tokens"].([]any)
	types := f.kv["tokenizer.ggml.token_type"].([]any)
	scores := f.kv["tokenizer.ggml.scores"].([]any)
	if len(toks) != 512 || len(types) != 512 || len(scores) != 512 {
		t.Fatalf("vocabulary of %d/%d/%d", len(toks), len(types), len(scores))
	}
	for id, want := range map[int]struct {
		piece string
		typ   int32
	}{0: {"<unk>", tokenUnknown}, 1: {"<s>", tokenControl}, 2: {"</s>", tokenControl}, 3: {"<0x00>", tokenByte}, 13: {"<0x0A>", tokenByte}} {
		if toks[id] != want.piece || types[id] != want.typ {
			t.Errorf("token %d = %q type %v, want %q type %d", id, toks[id], types[id], want.piece, want.typ)
		}
	}
	for id := 259; id < 512; id++ {
		p := tok.Vocab(uint32(id))
		if got := toks[id].(string); got != string(bytes.ReplaceAll([]byte(p), []byte(" "), []byte(spaceMark))) || types[id] != tokenNormal || scores[id] != tok.Score(uint32(id)) {
			t.Fatalf("token %d = %q type %v score %v, vocabulary %q score %v", id, got, types[id], scores[id], p, tok.Score(uint32(id)))
		}
	}

	// Every matrix, read back as ggml's {in, out}, equals the engine's
	// transposed (in x out) weights.
	d, h, kv := c.Dim, c.HiddenDim, c.KVDim()
	check := func(name string, wantDims []uint64, want []float32) {
		t.Helper()
		dims, got := f.values(t, name)
		if fmt.Sprint(dims) != fmt.Sprint(wantDims) {
			t.Fatalf("%s: dims %v, want %v", name, dims, wantDims)
		}
		in, out := int(dims[0]), 1
		if len(dims) > 1 {
			out = int(dims[1])
		}
		for o := range out {
			for i := range in {
				if got[o*in+i] != want[i*out+o] {
					t.Fatalf("%s[%d][%d] = %v, want %v", name, o, i, got[o*in+i], want[i*out+o])
				}
			}
		}
	}
	lay := func(w []float32, l, n int) []float32 { return w[l*n : (l+1)*n] }
	check("token_embd.weight", []uint64{uint64(d), 512}, m.Weights.WclsT)
	check("output.weight", []uint64{uint64(d), 512}, m.Weights.WclsT)
	check("output_norm.weight", []uint64{uint64(d)}, m.Weights.RMSFinal)
	for l := range c.NLayers {
		p := fmt.Sprintf("blk.%d.", l)
		check(p+"attn_norm.weight", []uint64{uint64(d)}, lay(m.Weights.RMSAtt, l, d))
		check(p+"attn_q.weight", []uint64{uint64(d), uint64(d)}, lay(m.Weights.WqT, l, d*d))
		check(p+"attn_k.weight", []uint64{uint64(d), uint64(kv)}, lay(m.Weights.WkT, l, d*kv))
		check(p+"attn_v.weight", []uint64{uint64(d), uint64(kv)}, lay(m.Weights.WvT, l, d*kv))
		check(p+"attn_output.weight", []uint64{uint64(d), uint64(d)}, lay(m.Weights.WoT, l, d*d))
		check(p+"ffn_norm.weight", []uint64{uint64(d)}, lay(m.Weights.RMSFFN, l, d))
		check(p+"ffn_gate.weight", []uint64{uint64(d), uint64(h)}, lay(m.Weights.W1T, l, d*h))
		check(p+"ffn_down.weight", []uint64{uint64(h), uint64(d)}, lay(m.Weights.W2T, l, h*d))
		check(p+"ffn_up.weight", []uint64{uint64(d), uint64(h)}, lay(m.Weights.W3T, l, d*h))
	}
}

func TestConvertErrors(t *testing.T) {
	ckpt, tok := loadStories(t)
	small, err := tokenizer.ParseBPE([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'a'}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ckpt []byte
		tok  *tokenizer.BPE
	}{
		{"truncated header", ckpt[:10], tok},
		{"truncated weights", ckpt[:len(ckpt)-4], tok},
		{"tokenizer of another model", ckpt, small},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ConvertLlama2c(&bytes.Buffer{}, tc.ckpt, tc.tok, "x"); err == nil {
				t.Fatal("converted")
			}
		})
	}
}

func TestWriteRefusesBadTensorsAndValues(t *testing.T) {
	if err := Write(&bytes.Buffer{}, nil, []Tensor{{Name: "t", Dims: []uint64{3}, Data: make([]byte, 8)}}); !errors.Is(err, ErrShape) {
		t.Errorf("short tensor: %v", err)
	}
	for _, v := range []any{1, []int{1}, []any{uint32(1)}, map[string]int{}} {
		if err := Write(&bytes.Buffer{}, []KV{{"k", v}}, nil); !errors.Is(err, ErrShape) {
			t.Errorf("%T value: %v", v, err)
		}
	}
}
