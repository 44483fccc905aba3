package llama

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"switchyard.dev/libs/engine/executor"
)

func header(vals ...int32) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, vals)
	return b.Bytes()
}

// image returns a zero-weight checkpoint of the right size for c.
func image(c Config) []byte {
	v := int32(c.VocabSize)
	if !c.SharedClassifier {
		v = -v
	}
	h := header(int32(c.Dim), int32(c.HiddenDim), int32(c.NLayers), int32(c.NHeads), int32(c.NKVHeads), v, int32(c.SeqLen))
	return append(h, make([]byte, 4*c.NumWeights())...)
}

var small = Config{Dim: 8, HiddenDim: 12, NLayers: 1, NHeads: 2, NKVHeads: 1, VocabSize: 300, SeqLen: 16, SharedClassifier: true}

func TestParseHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"stories", header(64, 172, 5, 8, 4, 512, 512), true},
		{"unshared", header(64, 172, 5, 8, 4, -512, 512), true},
		{"short", header(1, 2, 3), false},
		{"zero dim", header(0, 172, 5, 8, 4, 512, 512), false},
		{"heads do not divide", header(64, 172, 5, 7, 7, 512, 512), false},
		{"kv heads do not divide", header(64, 172, 5, 8, 3, 512, 512), false},
		{"odd head size", header(24, 172, 5, 8, 4, 512, 512), false},
		{"huge", header(1<<20, 1<<20, 1<<20, 8, 4, 512, 512), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := ParseHeader(tc.data)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrCheckpoint)) {
				t.Fatalf("ParseHeader = %+v, %v", c, err)
			}
		})
	}
	c, _ := ParseHeader(header(64, 172, 5, 8, 4, -512, 512))
	if c.SharedClassifier || c.VocabSize != 512 {
		t.Fatalf("negative vocab: %+v", c)
	}
	if Stories260K.FileSize() != 1056540 {
		t.Fatalf("stories260K size %d, want 1056540", Stories260K.FileSize())
	}
}

func TestLoadCheckpointErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := image(small)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := LoadCheckpoint(write("good.bin", good)); err != nil {
		t.Fatalf("good checkpoint: %v", err)
	}
	p := write("short.bin", good[:len(good)-4])
	_, err := LoadCheckpoint(p)
	want := []string{p, strconv.Itoa(len(good)), strconv.Itoa(len(good) - 4)}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("error %v must name %q", err, w)
		}
	}
	p = write("header.bin", header(1, 2))
	if _, err := LoadCheckpoint(p); err == nil || !strings.Contains(err.Error(), p) || !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("bad header: %v", err)
	}
	if _, err := LoadCheckpoint(filepath.Join(dir, "missing.bin")); err == nil {
		t.Fatal("missing file accepted")
	}
	if _, err := Open(write("g2.bin", good), filepath.Join(dir, "missing-tok.bin"), Options{}); err == nil {
		t.Fatal("missing tokenizer accepted")
	}
}

func TestRandomDeterministic(t *testing.T) {
	t.Parallel()
	a, _ := NewRandom(small, 3)
	b, _ := NewRandom(small, 3)
	c, _ := NewRandom(small, 4)
	if !slicesEqual(a.Weights.W1T, b.Weights.W1T) || slicesEqual(a.Weights.W1T, c.Weights.W1T) {
		t.Fatal("random weights must depend on the seed only")
	}
	e, err := NewTinyRandom(Config{}, 1, Options{})
	if err != nil || e.Config() != Stories260K {
		t.Fatalf("default shape %+v, %v", e.Config(), err)
	}
	if err := e.Execute(t.Context(), &executor.Batch{}); err == nil {
		t.Fatal("Execute before Bind accepted")
	}
	if err := e.Bind(executor.KV{BlockSize: 16, BlockBytes: 3}); err == nil {
		t.Fatal("mismatched block bytes accepted")
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzParseHeader(f *testing.F) {
	f.Add(header(64, 172, 5, 8, 4, 512, 512))
	f.Add(header(64, 172, 5, 8, 4, -512, 512))
	f.Add(header(-1, 0, 0, 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseHeader(data)
		if err != nil {
			return
		}
		if c.NumWeights() <= 0 || c.KVDim() <= 0 || c.HeadSize()%2 != 0 {
			t.Fatalf("accepted unusable shape %+v", c)
		}
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add(image(small))
	f.Add(header(8, 12, 1, 2, 1, 300, 16))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		m, err := ParseCheckpoint(data)
		if err != nil {
			return
		}
		if int64(len(data)) != m.Config.FileSize() {
			t.Fatalf("accepted %d bytes for %+v", len(data), m.Config)
		}
	})
}
