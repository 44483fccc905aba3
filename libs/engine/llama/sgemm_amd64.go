package llama

import "golang.org/x/sys/cpu"

// hasFMAKernel reports whether the strip kernels (sgemm_amd64.s) can run.
var hasFMAKernel = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func sgemm4x16(a *float32, lda int, b *float32, k int, c *float32, ldc int)

//go:noescape
func sgemm1x16(a *float32, b *float32, k int, c *float32)
