package profile

import (
	"math"
	"os"
	"testing"
)

// FuzzDecode: Decode never panics, and whatever it accepts validates,
// re-encodes, and decodes back to the same profile; the math on it stays
// finite and non-negative.
func FuzzDecode(f *testing.F) {
	if b, err := os.ReadFile(goldenFile); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"model":"m","block_size":1,"kv_blocks":1,"prefill":[{"input_tokens":1,"seconds":1}],"decode":[{"batch":1,"context_tokens":1,"itl_seconds":1},{"batch":2,"context_tokens":1,"itl_seconds":1}]}`))
	f.Add([]byte(`{"version":1,"model":"m","measured_at":"2026-12-02T16:00:00+05:30","block_size":1,"kv_blocks":1,"prefill":[{"input_tokens":1,"seconds":1e-300}],"decode":[{"batch":1,"context_tokens":1,"itl_seconds":1},{"batch":3,"context_tokens":1,"itl_seconds":0.5},{"batch":1,"context_tokens":9,"itl_seconds":2}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"model":"m"} x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Decode accepted a profile that does not validate: %v", err)
		}
		enc, err := p.Encode()
		if err != nil {
			t.Fatalf("Encode of an accepted profile: %v", err)
		}
		q, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode of the re-encoding: %v\n%s", err, enc)
		}
		if !equal(p, q) {
			t.Fatalf("round trip changed the profile:\n%+v\n%+v", p, q)
		}
		for _, n := range []int{1, 100, 4096} {
			checkFinite(t, "PrefillSeconds", p.PrefillSeconds(n))
			checkFinite(t, "DecodeITL", p.DecodeITL(n, n))
			if b := p.MaxBatchWithin(0.05, n, 0, 0); b < 0 || b > p.KVBlocks {
				t.Fatalf("MaxBatchWithin = %d, outside [0, kv_blocks %d]", b, p.KVBlocks)
			}
		}
	})
}

func checkFinite(t *testing.T, what string, v float64) {
	t.Helper()
	if v < 0 || math.IsNaN(v) {
		t.Fatalf("%s = %v, want a non-negative number", what, v)
	}
}
