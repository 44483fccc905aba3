package profile

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(p *Profile)
		wantErr string // "" = valid
	}{
		{"golden", func(*Profile) {}, ""},
		{"version", func(p *Profile) { p.Version = 2 }, "version 2 is not supported"},
		{"model", func(p *Profile) { p.Model = "" }, "model is empty"},
		{"block size", func(p *Profile) { p.BlockSize = 0 }, "block_size 0 is not positive"},
		{"kv blocks", func(p *Profile) { p.KVBlocks = -1 }, "kv_blocks -1 is not positive"},
		{"no prefill", func(p *Profile) { p.Prefill = nil }, "prefill has no points"},
		{"prefill tokens", func(p *Profile) { p.Prefill[0].InputTokens = 0 }, "prefill[0]: input_tokens 0 is not positive"},
		{"prefill seconds", func(p *Profile) { p.Prefill[1].Seconds = 0 }, "prefill[1]: seconds 0 is not a positive number"},
		{"prefill order", func(p *Profile) { p.Prefill[1].InputTokens = 128 }, "prefill[1]: input_tokens 128 is not above the previous point's 128"},
		{"no decode", func(p *Profile) { p.Decode = nil }, "decode has no points"},
		{"decode batch", func(p *Profile) { p.Decode[2].Batch = 0 }, "decode[2]: batch 0 is not positive"},
		{"decode context", func(p *Profile) { p.Decode[0].ContextTokens = -5 }, "decode[0]: context_tokens -5 is not positive"},
		{"decode itl", func(p *Profile) { p.Decode[3].ITLSeconds = -1 }, "decode[3]: itl_seconds -1 is not a positive number"},
		{"decode batch order", func(p *Profile) { p.Decode[1].Batch = 1 }, "decode[1]: (batch 1, context_tokens 512) is out of order"},
		{"decode context order", func(p *Profile) { p.Decode[4].ContextTokens = 256 }, "decode[4]: (batch 1, context_tokens 256) is out of order"},
		{"one batch per context", func(p *Profile) {
			p.Decode = []DecodePoint{{1, 512, 0.004}, {1, 1024, 0.005}}
		}, "two batch sizes at one context length"},
		{"one-point rows beside a full one", func(p *Profile) {
			p.Decode = []DecodePoint{{1, 512, 0.004}, {4, 512, 0.005}, {1, 1024, 0.005}}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := golden()
			tt.edit(p)
			err := p.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
