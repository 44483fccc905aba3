#include "textflag.h"

// Attention kernels for the SIMD kernel (AVX2 + FMA). Each is
// deterministic in its inputs alone: a position's score, weight or
// exponential never depends on the batch, the chunking of a prefill or
// the rest of the step, so the engine's exactness guarantees hold. They
// are not run.c's operation order (KernelGo keeps that).

// func scores8(att *float32, q *float32, hs int, k *float32, stride int, groups int, scale float32)
//
// att[s] = (q . k_s) / scale for groups*8 positions s, k_s = k + s*stride
// floats, hs (a multiple of 8) floats each. Each lane of eight fused
// multiply-add chains (one per position) runs over the head in order;
// the eight lanes are then summed as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
TEXT ·scores8(SB), NOSPLIT, $0-52
	MOVQ         att+0(FP), DX
	MOVQ         q+8(FP), SI
	MOVQ         hs+16(FP), CX
	MOVQ         k+24(FP), DI
	MOVQ         stride+32(FP), R8
	SHLQ         $2, R8
	MOVQ         groups+40(FP), R9
	VBROADCASTSS scale+48(FP), Y15
	LEAQ         (R8)(R8*2), R10
	MOVQ         R8, R11
	SHLQ         $3, R11

group:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   SI, R13
	MOVQ   DI, R14
	LEAQ   (DI)(R8*4), R15
	MOVQ   CX, BX

chunk:
	VMOVUPS     (R13), Y8
	VFMADD231PS (R14), Y8, Y0
	VFMADD231PS (R14)(R8*1), Y8, Y1
	VFMADD231PS (R14)(R8*2), Y8, Y2
	VFMADD231PS (R14)(R10*1), Y8, Y3
	VFMADD231PS (R15), Y8, Y4
	VFMADD231PS (R15)(R8*1), Y8, Y5
	VFMADD231PS (R15)(R8*2), Y8, Y6
	VFMADD231PS (R15)(R10*1), Y8, Y7
	ADDQ        $32, R13
	ADDQ        $32, R14
	ADDQ        $32, R15
	SUBQ        $8, BX
	JNE         chunk

	VHADDPS    Y1, Y0, Y0
	VHADDPS    Y3, Y2, Y2
	VHADDPS    Y5, Y4, Y4
	VHADDPS    Y7, Y6, Y6
	VHADDPS    Y2, Y0, Y0
	VHADDPS    Y6, Y4, Y4
	VPERM2F128 $0x20, Y4, Y0, Y1
	VPERM2F128 $0x31, Y4, Y0, Y2
	VADDPS     Y2, Y1, Y1
	VDIVPS     Y15, Y1, Y1
	VMOVUPS    Y1, (DX)
	ADDQ       $32, DX
	ADDQ       R11, DI
	DECQ       R9
	JNE        group
	VZEROUPPER
	RET

// func weighted8(out *float32, att *float32, n int, v *float32, stride int, hs int)
//
// out[0:hs] += sum over s < n of att[s] * v_s, v_s = v + s*stride floats,
// hs a multiple of 8. Positions go round-robin to four accumulators (the
// last n%4 to the first), summed as (a0+a1)+(a2+a3) and added to out.
TEXT ·weighted8(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DX
	MOVQ att+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ v+24(FP), DI
	MOVQ stride+32(FP), R8
	SHLQ $2, R8
	MOVQ hs+40(FP), R9
	LEAQ (R8)(R8*2), R10
	MOVQ R8, R11
	SHLQ $2, R11

wchunk:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   SI, AX
	MOVQ   DI, BX
	MOVQ   CX, R12
	CMPQ   R12, $4
	JLT    wtail

wquad:
	VBROADCASTSS (AX), Y4
	VFMADD231PS  (BX), Y4, Y0
	VBROADCASTSS 4(AX), Y5
	VFMADD231PS  (BX)(R8*1), Y5, Y1
	VBROADCASTSS 8(AX), Y6
	VFMADD231PS  (BX)(R8*2), Y6, Y2
	VBROADCASTSS 12(AX), Y7
	VFMADD231PS  (BX)(R10*1), Y7, Y3
	ADDQ         $16, AX
	ADDQ         R11, BX
	SUBQ         $4, R12
	CMPQ         R12, $4
	JGE          wquad

wtail:
	TESTQ R12, R12
	JEQ   wdone

wone:
	VBROADCASTSS (AX), Y4
	VFMADD231PS  (BX), Y4, Y0
	ADDQ         $4, AX
	ADDQ         R8, BX
	DECQ         R12
	JNE          wone

wdone:
	VADDPS  Y1, Y0, Y0
	VADDPS  Y3, Y2, Y2
	VADDPS  Y2, Y0, Y0
	VADDPS  (DX), Y0, Y0
	VMOVUPS Y0, (DX)
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, R9
	JNE     wchunk
	VZEROUPPER
	RET

// func expf8(x *float32, n int, a, b float32)
//
// x[i] = e^(a*x[i]+b) (a*x+b fused: exactly x-m for a = 1, b = -m) for n (a multiple of 8) floats, eight at a time: Cephes'
// expf reduction (x = n ln2 + r, ln2 in two parts) and degree-7
// polynomial, with fused multiply-adds; within 2 ulp of e^x. Inputs below
// -86.9 give 0 (e^-86.9 is 2e-38: the normal range ends there), above
// 88.72283 +Inf, NaN NaN.
TEXT ·expf8(SB), NOSPLIT, $0-24
	MOVQ    x+0(FP), DI
	MOVQ    n+8(FP), CX
	TESTQ   CX, CX
	JEQ     edone
	VBROADCASTSS a+16(FP), Y3
	VMOVUPS expc<>+0(SB), Y8
	VMOVUPS expc<>+32(SB), Y9
	VMOVUPS expc<>+64(SB), Y10
	VMOVUPS expc<>+320(SB), Y11
	VMOVUPS expc<>+352(SB), Y12
	VMOVUPS expc<>+96(SB), Y13
	VMOVUPS expc<>+416(SB), Y14
	VBROADCASTSS b+20(FP), Y15

eloop:
	VMOVUPS      (DI), Y0
	VFMADD213PS  Y15, Y3, Y0
	VMINPS       Y12, Y0, Y1
	VMAXPS       Y11, Y1, Y1
	VMULPS       Y8, Y1, Y2
	VROUNDPS     $0, Y2, Y2
	VFNMADD231PS Y9, Y2, Y1
	VFNMADD231PS Y10, Y2, Y1
	VMOVAPS      Y13, Y4
	VFMADD213PS  expc<>+128(SB), Y1, Y4
	VFMADD213PS  expc<>+160(SB), Y1, Y4
	VFMADD213PS  expc<>+192(SB), Y1, Y4
	VFMADD213PS  expc<>+224(SB), Y1, Y4
	VFMADD213PS  expc<>+256(SB), Y1, Y4
	VMULPS       Y1, Y1, Y5
	VFMADD213PS  Y1, Y5, Y4
	VADDPS       expc<>+288(SB), Y4, Y4
	VCVTPS2DQ    Y2, Y6
	VPADDD       Y14, Y6, Y6
	VPSLLD       $23, Y6, Y6
	VADDPS       Y4, Y4, Y4
	VMULPS       Y6, Y4, Y4
	VCMPPS       $0x1e, Y12, Y0, Y7
	VBLENDVPS    Y7, expc<>+384(SB), Y4, Y4
	VCMPPS       $0x11, Y11, Y0, Y7
	VANDNPS      Y4, Y7, Y4
	VCMPPS       $3, Y0, Y0, Y7
	VBLENDVPS    Y7, Y0, Y4, Y4
	VMOVUPS      Y4, (DI)
	ADDQ         $32, DI
	SUBQ         $8, CX
	JNE          eloop

edone:
	VZEROUPPER
	RET

// func max8(x *float32, n int) float32
//
// The largest of n (a multiple of 8, at least 8) floats.
TEXT ·max8(SB), NOSPLIT, $0-20
	MOVQ       x+0(FP), DI
	MOVQ       n+8(FP), CX
	VMOVUPS    (DI), Y0
	ADDQ       $32, DI
	SUBQ       $8, CX
	JEQ        mreduce

mloop:
	VMAXPS     (DI), Y0, Y0
	ADDQ       $32, DI
	SUBQ       $8, CX
	JNE        mloop

mreduce:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS     X1, X0, X0
	VPERMILPS  $0x4e, X0, X1
	VMAXPS     X1, X0, X0
	VPERMILPS  $0xb1, X0, X1
	VMAXPS     X1, X0, X0
	VMOVSS     X0, ret+16(FP)
	VZEROUPPER
	RET

// func sum8(x *float32, n int) float32
//
// The sum of n (a multiple of 8) floats: eight lane sums in order, then
// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)).
TEXT ·sum8(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), DI
	MOVQ    n+8(FP), CX
	VXORPS  Y0, Y0, Y0
	TESTQ   CX, CX
	JEQ     sreduce

sloop:
	VADDPS  (DI), Y0, Y0
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNE     sloop

sreduce:
	VEXTRACTF128 $1, Y0, X1
	VADDPS  X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VADDPS  X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VADDPS  X1, X0, X0
	VMOVSS  X0, ret+16(FP)
	VZEROUPPER
	RET

// func div8(x *float32, n int, d float32)
//
// x[i] /= d for n (a multiple of 8) floats.
TEXT ·div8(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS d+16(FP), Y1
	TESTQ        CX, CX
	JEQ          ddone

dloop:
	VMOVUPS (DI), Y0
	VDIVPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNE     dloop

ddone:
	VZEROUPPER
	RET

DATA expc<>+0(SB)/4, $0x3fb8aa3b
DATA expc<>+4(SB)/4, $0x3fb8aa3b
DATA expc<>+8(SB)/4, $0x3fb8aa3b
DATA expc<>+12(SB)/4, $0x3fb8aa3b
DATA expc<>+16(SB)/4, $0x3fb8aa3b
DATA expc<>+20(SB)/4, $0x3fb8aa3b
DATA expc<>+24(SB)/4, $0x3fb8aa3b
DATA expc<>+28(SB)/4, $0x3fb8aa3b
DATA expc<>+32(SB)/4, $0x3f318000
DATA expc<>+36(SB)/4, $0x3f318000
DATA expc<>+40(SB)/4, $0x3f318000
DATA expc<>+44(SB)/4, $0x3f318000
DATA expc<>+48(SB)/4, $0x3f318000
DATA expc<>+52(SB)/4, $0x3f318000
DATA expc<>+56(SB)/4, $0x3f318000
DATA expc<>+60(SB)/4, $0x3f318000
DATA expc<>+64(SB)/4, $0xb95e8083
DATA expc<>+68(SB)/4, $0xb95e8083
DATA expc<>+72(SB)/4, $0xb95e8083
DATA expc<>+76(SB)/4, $0xb95e8083
DATA expc<>+80(SB)/4, $0xb95e8083
DATA expc<>+84(SB)/4, $0xb95e8083
DATA expc<>+88(SB)/4, $0xb95e8083
DATA expc<>+92(SB)/4, $0xb95e8083
DATA expc<>+96(SB)/4, $0x39506967
DATA expc<>+100(SB)/4, $0x39506967
DATA expc<>+104(SB)/4, $0x39506967
DATA expc<>+108(SB)/4, $0x39506967
DATA expc<>+112(SB)/4, $0x39506967
DATA expc<>+116(SB)/4, $0x39506967
DATA expc<>+120(SB)/4, $0x39506967
DATA expc<>+124(SB)/4, $0x39506967
DATA expc<>+128(SB)/4, $0x3ab743ce
DATA expc<>+132(SB)/4, $0x3ab743ce
DATA expc<>+136(SB)/4, $0x3ab743ce
DATA expc<>+140(SB)/4, $0x3ab743ce
DATA expc<>+144(SB)/4, $0x3ab743ce
DATA expc<>+148(SB)/4, $0x3ab743ce
DATA expc<>+152(SB)/4, $0x3ab743ce
DATA expc<>+156(SB)/4, $0x3ab743ce
DATA expc<>+160(SB)/4, $0x3c088908
DATA expc<>+164(SB)/4, $0x3c088908
DATA expc<>+168(SB)/4, $0x3c088908
DATA expc<>+172(SB)/4, $0x3c088908
DATA expc<>+176(SB)/4, $0x3c088908
DATA expc<>+180(SB)/4, $0x3c088908
DATA expc<>+184(SB)/4, $0x3c088908
DATA expc<>+188(SB)/4, $0x3c088908
DATA expc<>+192(SB)/4, $0x3d2aa9c1
DATA expc<>+196(SB)/4, $0x3d2aa9c1
DATA expc<>+200(SB)/4, $0x3d2aa9c1
DATA expc<>+204(SB)/4, $0x3d2aa9c1
DATA expc<>+208(SB)/4, $0x3d2aa9c1
DATA expc<>+212(SB)/4, $0x3d2aa9c1
DATA expc<>+216(SB)/4, $0x3d2aa9c1
DATA expc<>+220(SB)/4, $0x3d2aa9c1
DATA expc<>+224(SB)/4, $0x3e2aaaaa
DATA expc<>+228(SB)/4, $0x3e2aaaaa
DATA expc<>+232(SB)/4, $0x3e2aaaaa
DATA expc<>+236(SB)/4, $0x3e2aaaaa
DATA expc<>+240(SB)/4, $0x3e2aaaaa
DATA expc<>+244(SB)/4, $0x3e2aaaaa
DATA expc<>+248(SB)/4, $0x3e2aaaaa
DATA expc<>+252(SB)/4, $0x3e2aaaaa
DATA expc<>+256(SB)/4, $0x3f000000
DATA expc<>+260(SB)/4, $0x3f000000
DATA expc<>+264(SB)/4, $0x3f000000
DATA expc<>+268(SB)/4, $0x3f000000
DATA expc<>+272(SB)/4, $0x3f000000
DATA expc<>+276(SB)/4, $0x3f000000
DATA expc<>+280(SB)/4, $0x3f000000
DATA expc<>+284(SB)/4, $0x3f000000
DATA expc<>+288(SB)/4, $0x3f800000
DATA expc<>+292(SB)/4, $0x3f800000
DATA expc<>+296(SB)/4, $0x3f800000
DATA expc<>+300(SB)/4, $0x3f800000
DATA expc<>+304(SB)/4, $0x3f800000
DATA expc<>+308(SB)/4, $0x3f800000
DATA expc<>+312(SB)/4, $0x3f800000
DATA expc<>+316(SB)/4, $0x3f800000
DATA expc<>+320(SB)/4, $0xc2adcccd
DATA expc<>+324(SB)/4, $0xc2adcccd
DATA expc<>+328(SB)/4, $0xc2adcccd
DATA expc<>+332(SB)/4, $0xc2adcccd
DATA expc<>+336(SB)/4, $0xc2adcccd
DATA expc<>+340(SB)/4, $0xc2adcccd
DATA expc<>+344(SB)/4, $0xc2adcccd
DATA expc<>+348(SB)/4, $0xc2adcccd
DATA expc<>+352(SB)/4, $0x42b17217
DATA expc<>+356(SB)/4, $0x42b17217
DATA expc<>+360(SB)/4, $0x42b17217
DATA expc<>+364(SB)/4, $0x42b17217
DATA expc<>+368(SB)/4, $0x42b17217
DATA expc<>+372(SB)/4, $0x42b17217
DATA expc<>+376(SB)/4, $0x42b17217
DATA expc<>+380(SB)/4, $0x42b17217
DATA expc<>+384(SB)/4, $0x7f800000
DATA expc<>+388(SB)/4, $0x7f800000
DATA expc<>+392(SB)/4, $0x7f800000
DATA expc<>+396(SB)/4, $0x7f800000
DATA expc<>+400(SB)/4, $0x7f800000
DATA expc<>+404(SB)/4, $0x7f800000
DATA expc<>+408(SB)/4, $0x7f800000
DATA expc<>+412(SB)/4, $0x7f800000
DATA expc<>+416(SB)/4, $0x0000007e
DATA expc<>+420(SB)/4, $0x0000007e
DATA expc<>+424(SB)/4, $0x0000007e
DATA expc<>+428(SB)/4, $0x0000007e
DATA expc<>+432(SB)/4, $0x0000007e
DATA expc<>+436(SB)/4, $0x0000007e
DATA expc<>+440(SB)/4, $0x0000007e
DATA expc<>+444(SB)/4, $0x0000007e
GLOBL expc<>(SB), RODATA|NOPTR, $448
