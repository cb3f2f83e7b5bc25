//go:build amd64 && !noasm && !gccgo && !safe

package cpu

// gonumAsm reports whether gonum's GEMM runs on assembly in this build:
// gonum v0.17's internal/asm/f32 has SSE kernels for amd64 only, under the
// build constraint of this file.
const gonumAsm = true
