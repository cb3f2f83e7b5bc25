//go:build !linux

package cpu

// amxPermitted reports false: only Linux is asked for the AMX tile state
// here (amx_linux_amd64.go).
func amxPermitted() bool { return false }
