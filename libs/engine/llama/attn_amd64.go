package llama

// The attention kernels of attn_amd64.s; callers check hasFMAKernel.

//go:noescape
func scores8(att *float32, q *float32, hs int, k *float32, stride int, groups int, scale float32)

//go:noescape
func weighted8(out *float32, att *float32, n int, v *float32, stride int, hs int)

//go:noescape
func expf8(x *float32, n int, a, b float32)

//go:noescape
func max8(x *float32, n int) float32

//go:noescape
func sum8(x *float32, n int) float32

//go:noescape
func div8(x *float32, n int, d float32)
