package llamacpp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// GGUF is what a worker checks in a GGUF file before handing it to
// llama-server, whose own error for a file it cannot load is a log line
// among hundreds.
type GGUF struct {
	Name         string // general.name
	Architecture string // general.architecture
	ContextLen   int    // <architecture>.context_length
	VocabSize    int    // entries of tokenizer.ggml.tokens
}

// ggufMagic is "GGUF" read as a little-endian uint32.
const ggufMagic = 0x46554747

// Bounds on what a header may claim, so a corrupt file is an error rather
// than an allocation of its claimed size.
const (
	maxGGUFString = 1 << 24
	maxGGUFKVs    = 1 << 16
)

// ReadGGUF reads the metadata of the GGUF file at path (not its tensors).
func ReadGGUF(path string) (GGUF, error) {
	f, err := os.Open(path)
	if err != nil {
		return GGUF{}, err
	}
	defer f.Close()
	g, err := parseGGUF(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return GGUF{}, fmt.Errorf("not a GGUF model llama.cpp can load: %w", err)
	}
	return g, nil
}

type ggufReader struct {
	r   io.Reader
	err error
}

func (g *ggufReader) read(p []byte) {
	if g.err == nil {
		_, g.err = io.ReadFull(g.r, p)
		if errors.Is(g.err, io.EOF) {
			g.err = io.ErrUnexpectedEOF
		}
	}
}

func (g *ggufReader) u32() uint32 {
	var b [4]byte
	g.read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

func (g *ggufReader) u64() uint64 {
	var b [8]byte
	g.read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func (g *ggufReader) str() string {
	n := g.u64()
	if g.err != nil {
		return ""
	}
	if n > maxGGUFString {
		g.err = fmt.Errorf("a string of %d bytes", n)
		return ""
	}
	b := make([]byte, n)
	g.read(b)
	return string(b)
}

func (g *ggufReader) skip(n uint64) {
	if g.err == nil {
		_, g.err = io.CopyN(io.Discard, g.r, int64(min(n, 1<<62)))
		if errors.Is(g.err, io.EOF) {
			g.err = io.ErrUnexpectedEOF
		}
	}
}

// GGUF metadata value types.
const (
	ggufUint8, ggufInt8, ggufUint16, ggufInt16, ggufUint32, ggufInt32, ggufFloat32, ggufBool, ggufString, ggufArray, ggufUint64, ggufInt64, ggufFloat64 = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
)

// scalarSize is the byte size of a fixed-size type, or 0.
func scalarSize(t uint32) uint64 {
	switch t {
	case ggufUint8, ggufInt8, ggufBool:
		return 1
	case ggufUint16, ggufInt16:
		return 2
	case ggufUint32, ggufInt32, ggufFloat32:
		return 4
	case ggufUint64, ggufInt64, ggufFloat64:
		return 8
	}
	return 0
}

func parseGGUF(r io.Reader) (GGUF, error) {
	g := &ggufReader{r: r}
	if m := g.u32(); g.err == nil && m != ggufMagic {
		return GGUF{}, fmt.Errorf("magic %#08x, want %#08x (\"GGUF\")", m, ggufMagic)
	}
	if v := g.u32(); g.err == nil && (v < 2 || v > 3) {
		return GGUF{}, fmt.Errorf("GGUF version %d, want 2 or 3", v)
	}
	_ = g.u64() // tensors
	nkv := g.u64()
	if g.err == nil && nkv > maxGGUFKVs {
		return GGUF{}, fmt.Errorf("%d metadata entries", nkv)
	}
	var out GGUF
	ints := map[string]uint64{}
	for i := uint64(0); i < nkv && g.err == nil; i++ {
		key := g.str()
		t := g.u32()
		switch {
		case t == ggufString:
			v := g.str()
			switch key {
			case "general.name":
				out.Name = v
			case "general.architecture":
				out.Architecture = v
			}
		case t == ggufArray:
			et, n := g.u32(), g.u64()
			if key == "tokenizer.ggml.tokens" {
				out.VocabSize = int(min(n, 1<<31))
			}
			g.skipArray(et, n)
		case scalarSize(t) > 0:
			var b [8]byte
			g.read(b[:scalarSize(t)])
			ints[key] = binary.LittleEndian.Uint64(b[:])
		default:
			return GGUF{}, fmt.Errorf("metadata %q has unknown type %d", key, t)
		}
	}
	if g.err != nil {
		return GGUF{}, g.err
	}
	out.ContextLen = int(min(ints[out.Architecture+".context_length"], 1<<31))
	switch {
	case out.Architecture == "":
		return GGUF{}, errors.New("no general.architecture")
	case out.VocabSize == 0:
		return GGUF{}, errors.New("no tokenizer.ggml.tokens: the file carries no vocabulary")
	case out.ContextLen == 0:
		return GGUF{}, fmt.Errorf("no %s.context_length", out.Architecture)
	}
	return out, nil
}

func (g *ggufReader) skipArray(t uint32, n uint64) {
	if n > 1<<40 {
		g.err = fmt.Errorf("an array of %d entries", n)
		return
	}
	if sz := scalarSize(t); sz > 0 {
		g.skip(n * sz)
		return
	}
	if t != ggufString {
		g.err = fmt.Errorf("an array of type %d", t)
		return
	}
	for i := uint64(0); i < n && g.err == nil; i++ {
		g.skip(g.u64())
	}
}
