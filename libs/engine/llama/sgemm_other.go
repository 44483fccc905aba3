//go:build !amd64

package llama

const hasFMAKernel = false

func sgemm4x16(a *float32, lda int, b *float32, k int, c *float32, ldc int) {
	panic("llama: no strip kernel on this architecture")
}

func sgemm1x16(a *float32, b *float32, k int, c *float32) {
	panic("llama: no strip kernel on this architecture")
}
