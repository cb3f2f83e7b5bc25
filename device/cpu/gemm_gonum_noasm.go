//go:build !amd64 || noasm || gccgo || safe

package cpu

// gonumAsm reports whether gonum's GEMM runs on assembly in this build: not
// here (gonum v0.17 has none for this GOARCH, or the build tags turn it
// off), so it is pure Go, half the speed of the native GEMM's portable
// kernel (native_portable.go).
const gonumAsm = false
