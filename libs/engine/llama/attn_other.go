//go:build !amd64

package llama

// Stubs for the attention kernels of attn_amd64.s; callers check
// hasFMAKernel, which is false here, so these never run.

func scores8(att *float32, q *float32, hs int, k *float32, stride int, groups int, scale float32) {
	panic("llama: no attention kernel on this architecture")
}

func weighted8(out *float32, att *float32, n int, v *float32, stride int, hs int) {
	panic("llama: no attention kernel on this architecture")
}

func expf8(x *float32, n int, a, b float32) { panic("llama: no exp kernel on this architecture") }

func max8(x *float32, n int) float32 { panic("llama: no attention kernel on this architecture") }

func sum8(x *float32, n int) float32 { panic("llama: no attention kernel on this architecture") }

func div8(x *float32, n int, d float32) { panic("llama: no attention kernel on this architecture") }
