//go:build !amd64

package cudaemu

// fastSwitch is EMU_FAST_SWITCH by default on this architecture.
const fastSwitch = 0
