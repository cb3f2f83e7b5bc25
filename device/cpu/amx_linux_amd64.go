package cpu

import "syscall"

// amxPermitted asks Linux for the AMX tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16 and later), which
// a process must hold before its first tile instruction; it reports whether
// it was granted. The grant is for the whole process: later threads have
// it, and the kernel saves the tiles with the other registers (Go's 32 KiB
// signal stacks take the larger signal frame).
func amxPermitted() bool {
	const archReqXcompPerm, xfeatureXTileData = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXTileData, 0)
	return errno == 0
}
