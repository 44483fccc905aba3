package gguf

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/tokenizer"
)

// llama.cpp's token types (llama_token_type).
const (
	tokenNormal  int32 = 1
	tokenUnknown int32 = 2
	tokenControl int32 = 3
	tokenByte    int32 = 6
)

// spaceMark is sentencepiece's visible space, which llama.cpp's "llama"
// tokenizer expects in pieces where llama2.c's vocabulary has ' '.
const spaceMark = "\u2581"

// llama2.c's run.c constants that its checkpoint does not carry.
const (
	ropeBase   float32 = 10000
	rmsEpsilon float32 = 1e-5
)

// FromLlama2c converts a llama2.c checkpoint image (the whole .bin file)
// and its tokenizer into GGUF tensors and metadata for llama.cpp's
// "llama" architecture. Weights are copied bit for bit: llama2.c stores
// every matrix out x in, row-major, which is ggml's {in, out}, and its
// rotary embedding pairs adjacent dimensions as llama.cpp's llama
// architecture does, so no permutation is needed. A shared classifier is
// written as an explicit output tensor, a copy of the embedding.
func FromLlama2c(ckpt []byte, tok *tokenizer.BPE, name string) ([]KV, []Tensor, error) {
	c, err := llama.ParseHeader(ckpt)
	if err != nil {
		return nil, nil, err
	}
	if want := c.FileSize(); int64(len(ckpt)) != want {
		return nil, nil, fmt.Errorf("%w: header %+v implies %d bytes, file has %d", llama.ErrCheckpoint, c, want, len(ckpt))
	}
	if tok.VocabSize() != c.VocabSize {
		return nil, nil, fmt.Errorf("gguf: tokenizer has %d tokens, checkpoint %d", tok.VocabSize(), c.VocabSize)
	}
	kvs := llamaMetadata(c, name)
	kvs = append(kvs, vocabMetadata(tok)...)

	d, h, l, kv, v := uint64(c.Dim), uint64(c.HiddenDim), c.NLayers, uint64(c.KVDim()), uint64(c.VocabSize)
	r := floats{data: ckpt[llama.HeaderSize:]}
	embd := r.next(v * d)
	rmsAtt, wq, wk, wv, wo := r.next(uint64(l)*d), r.next(uint64(l)*d*d), r.next(uint64(l)*d*kv), r.next(uint64(l)*d*kv), r.next(uint64(l)*d*d)
	rmsFFN, w1, w2, w3 := r.next(uint64(l)*d), r.next(uint64(l)*d*h), r.next(uint64(l)*h*d), r.next(uint64(l)*d*h)
	rmsFinal := r.next(d)
	r.next(uint64(c.SeqLen) * uint64(c.HeadSize())) // freq_cis_real, freq_cis_imag: llama.cpp computes its own
	cls := embd
	if !c.SharedClassifier {
		cls = r.next(v * d)
	}

	ts := []Tensor{
		{Name: "token_embd.weight", Dims: []uint64{d, v}, Data: embd},
		{Name: "output_norm.weight", Dims: []uint64{d}, Data: rmsFinal},
		{Name: "output.weight", Dims: []uint64{d, v}, Data: cls},
	}
	layer := func(b []byte, i int, n uint64) []byte { return b[uint64(i)*n*4 : uint64(i+1)*n*4] }
	for i := range l {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			Tensor{Name: p + "attn_norm.weight", Dims: []uint64{d}, Data: layer(rmsAtt, i, d)},
			Tensor{Name: p + "attn_q.weight", Dims: []uint64{d, d}, Data: layer(wq, i, d*d)},
			Tensor{Name: p + "attn_k.weight", Dims: []uint64{d, kv}, Data: layer(wk, i, d*kv)},
			Tensor{Name: p + "attn_v.weight", Dims: []uint64{d, kv}, Data: layer(wv, i, d*kv)},
			Tensor{Name: p + "attn_output.weight", Dims: []uint64{d, d}, Data: layer(wo, i, d*d)},
			Tensor{Name: p + "ffn_norm.weight", Dims: []uint64{d}, Data: layer(rmsFFN, i, d)},
			Tensor{Name: p + "ffn_gate.weight", Dims: []uint64{d, h}, Data: layer(w1, i, d*h)},
			Tensor{Name: p + "ffn_down.weight", Dims: []uint64{h, d}, Data: layer(w2, i, h*d)},
			Tensor{Name: p + "ffn_up.weight", Dims: []uint64{d, h}, Data: layer(w3, i, d*h)},
		)
	}
	return kvs, ts, nil
}

// ConvertLlama2c writes the GGUF form of a llama2.c checkpoint to w.
func ConvertLlama2c(w io.Writer, ckpt []byte, tok *tokenizer.BPE, name string) error {
	kvs, ts, err := FromLlama2c(ckpt, tok, name)
	if err != nil {
		return err
	}
	return Write(w, kvs, ts)
}

func llamaMetadata(c llama.Config, name string) []KV {
	return []KV{
		{"general.architecture", "llama"},
		{"general.name", name},
		{"general.file_type", uint32(0)}, // all float32
		{"llama.context_length", uint32(c.SeqLen)},
		{"llama.embedding_length", uint32(c.Dim)},
		{"llama.feed_forward_length", uint32(c.HiddenDim)},
		{"llama.block_count", uint32(c.NLayers)},
		{"llama.attention.head_count", uint32(c.NHeads)},
		{"llama.attention.head_count_kv", uint32(c.NKVHeads)},
		{"llama.rope.dimension_count", uint32(c.HeadSize())},
		{"llama.rope.freq_base", ropeBase},
		{"llama.attention.layer_norm_rms_epsilon", rmsEpsilon},
		{"llama.vocab_size", uint32(c.VocabSize)},
	}
}

// vocabMetadata is tok as llama.cpp's sentencepiece-style "llama"
// tokenizer: the same ids, pieces with ' ' as U+2581, the same merge
// scores, byte fallbacks typed as bytes, and the llama2.c ids for UNK,
// BOS and EOS.
func vocabMetadata(tok *tokenizer.BPE) []KV {
	n := tok.VocabSize()
	pieces, scores, types := make([]string, n), make([]float32, n), make([]int32, n)
	for i := range n {
		id := uint32(i)
		p := tok.Vocab(id)
		scores[i] = tok.Score(id)
		switch {
		case id == tokenizer.UNK:
			pieces[i], types[i] = "<unk>", tokenUnknown
		case id == tokenizer.BOS:
			pieces[i], types[i] = "<s>", tokenControl
		case id == tokenizer.EOS:
			pieces[i], types[i] = "</s>", tokenControl
		case isBytePiece(p):
			pieces[i], types[i] = p, tokenByte
		default:
			pieces[i], types[i] = strings.ReplaceAll(p, " ", spaceMark), tokenNormal
		}
	}
	return []KV{
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", pieces},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.unknown_token_id", tokenizer.UNK},
		{"tokenizer.ggml.bos_token_id", tokenizer.BOS},
		{"tokenizer.ggml.eos_token_id", tokenizer.EOS},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
	}
}

// isBytePiece reports whether p is a byte fallback piece, "<0xXX>".
func isBytePiece(p string) bool {
	if len(p) != 6 || !strings.HasPrefix(p, "<0x") || p[5] != '>' {
		return false
	}
	for _, c := range p[3:5] {
		if (c < '0' || c > '9') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// floats cuts consecutive float32 arrays out of a checkpoint's bytes.
type floats struct{ data []byte }

func (f *floats) next(n uint64) []byte {
	b := f.data[:n*4]
	f.data = f.data[n*4:]
	return b
}

// ConvertFiles converts the llama2.c checkpoint at ckptPath with the
// tokenizer at tokPath into a GGUF file at out, written whole or not at
// all (a temporary file renamed into place).
//
// extra entries are added to the metadata (a tokenizer.chat_template, say).
func ConvertFiles(out, ckptPath, tokPath, name string, extra ...KV) error {
	ckpt, err := os.ReadFile(ckptPath)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	c, err := llama.ParseHeader(ckpt)
	if err != nil {
		return fmt.Errorf("%s: %w", ckptPath, err)
	}
	tok, err := tokenizer.LoadBPEFile(tokPath, c.VocabSize)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	kvs, ts, err := FromLlama2c(ckpt, tok, name)
	if err == nil {
		err = Write(f, append(kvs, extra...), ts)
	}
	if err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err := os.Rename(f.Name(), out); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}
