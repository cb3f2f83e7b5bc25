package main

import (
	"fmt"
	"strings"
)

// The instructions Go's assembler (go1.26) does not know, encoded here and
// written as BYTE directives: VDPBF16PS (EVEX) and the AMX tile
// instructions (VEX). Registers are x86 numbers: zmm0-31, tmm0-7, and the
// general registers below. TestEncodings checks every form against GNU as.

// instruction is one encoded instruction: its GNU as (AT&T) text and its
// bytes.
type instruction struct {
	att   string
	bytes []byte
}

// emit writes in as BYTE directives, its assembler text in a comment.
func emit(in instruction) {
	parts := make([]string, len(in.bytes))
	for i, b := range in.bytes {
		parts[i] = fmt.Sprintf("BYTE $0x%02x", b)
	}
	p("\t%s // %s", strings.Join(parts, "; "), in.att)
}

// The general registers by x86 number, as Go's assembler and GNU as name
// them.
var (
	goRegs  = []string{"AX", "CX", "DX", "BX", "SP", "BP", "SI", "DI", "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15"}
	attRegs = []string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}
)

// reg returns the x86 number of a general register named as Go's assembler
// names it.
func reg(name string) int {
	for i, n := range goRegs {
		if n == name {
			return i
		}
	}
	panic("nativegen: no register " + name)
}

// bit returns 1 when x has the bits of mask.
func bit(x, mask int) byte {
	if x&mask != 0 {
		return 1
	}
	return 0
}

// vdpbf16ps returns VDPBF16PS zmm(acc), zmm(src1), zmm(src2) (Intel
// order): for each float32 lane i, acc += src1.bf16[2i+1] src2.bf16[2i+1],
// then += src1.bf16[2i] src2.bf16[2i]. EVEX.512.F3.0F38.W0 52 /r, acc in
// ModRM.reg, src1 in EVEX.vvvv, src2 in ModRM.rm, no mask.
func vdpbf16ps(acc, src1, src2 int) instruction {
	const ppF3, map0F38 = 2, 2
	p0 := (1-bit(acc, 8))<<7 | (1-bit(src2, 16))<<6 | (1-bit(src2, 8))<<5 | (1-bit(acc, 16))<<4 | map0F38
	p1 := byte(^src1&15)<<3 | 1<<2 | ppF3   // W0, vvvv inverted, the fixed 1, pp
	p2 := byte(2)<<5 | (1-bit(src1, 16))<<3 // L'L = 512 bits, V' inverted, no mask
	modrm := 0xc0 | byte(acc&7)<<3 | byte(src2&7)
	return instruction{
		att:   fmt.Sprintf("vdpbf16ps %%zmm%d, %%zmm%d, %%zmm%d", src2, src1, acc),
		bytes: []byte{0x62, p0, p1, p2, 0x52, modrm},
	}
}

// mem is a memory operand: base + index*1 + disp (index -1: none).
type mem struct {
	base, index int
	disp        int32
}

func (m mem) att() string {
	d := ""
	if m.disp != 0 {
		d = fmt.Sprint(m.disp)
	}
	if m.index < 0 {
		return fmt.Sprintf("%s(%%%s)", d, attRegs[m.base])
	}
	return fmt.Sprintf("%s(%%%s,%%%s,1)", d, attRegs[m.base], attRegs[m.index])
}

// modRM returns the ModRM byte (with field reg), SIB and displacement of
// m, and m's VEX X and B bits (set for registers 8-15). The AMX tile loads
// and stores take only a SIB form; an index of SP is not encodable.
func (m mem) modRM(regField int) (enc []byte, x, b byte) {
	mod, disp := byte(0), []byte(nil)
	switch {
	case m.disp == 0 && m.base&7 != 5: // BP and R13 need a displacement
	case m.disp >= -128 && m.disp < 128:
		mod, disp = 1, []byte{byte(int8(m.disp))}
	default:
		mod = 2
		disp = []byte{byte(m.disp), byte(m.disp >> 8), byte(m.disp >> 16), byte(m.disp >> 24)}
	}
	r := byte(regField&7) << 3
	switch {
	case m.index >= 0:
		if m.index == 4 {
			panic("nativegen: SP cannot be an index")
		}
		enc = []byte{mod<<6 | r | 4, byte(m.index&7)<<3 | byte(m.base&7)}
		x = bit(m.index, 8)
	case m.base&7 == 4: // SP and R12 as a base need a SIB byte (no index)
		enc = []byte{mod<<6 | r | 4, 4<<3 | 4}
	default:
		enc = []byte{mod<<6 | r | byte(m.base&7)}
	}
	return append(enc, disp...), x, bit(m.base, 8)
}

// vex3 returns a three-byte VEX prefix for map 0F38, W0, 128 bits, with
// the R, X, B bits given (1 for registers 8-15), vvvv and pp.
func vex3(r, x, b byte, vvvv int, pp byte) []byte {
	const map0F38 = 2
	return []byte{0xc4, (1-r)<<7 | (1-x)<<6 | (1-b)<<5 | map0F38, byte(^vvvv&15)<<3 | pp}
}

// AMX's pp values: none, 66, F3, F2.
const ppNone, pp66, ppF3, ppF2 = 0, 1, 2, 3

// amxMem encodes an AMX instruction with a memory operand: VEX.128.pp.0F38.W0
// op /r with tmm in ModRM.reg (vvvv unused, 1111).
func amxMem(pp, op byte, tmm int, m mem) []byte {
	enc, x, b := m.modRM(tmm)
	return append(append(vex3(0, x, b, 0, pp), op), enc...)
}

// ldtilecfg returns LDTILECFG m512: load the tile configuration at m.
func ldtilecfg(m mem) instruction {
	return instruction{att: "ldtilecfg " + m.att(), bytes: amxMem(ppNone, 0x49, 0, m)}
}

// tileloadd returns TILELOADD tmm, [base + index*1 + disp]: the tile's rows
// from base+disp, index bytes apart.
func tileloadd(tmm int, m mem) instruction {
	return instruction{att: fmt.Sprintf("tileloadd %s, %%tmm%d", m.att(), tmm), bytes: amxMem(ppF2, 0x4b, tmm, m)}
}

// tilestored returns TILESTORED [base + index*1 + disp], tmm.
func tilestored(m mem, tmm int) instruction {
	return instruction{att: fmt.Sprintf("tilestored %%tmm%d, %s", tmm, m.att()), bytes: amxMem(ppF3, 0x4b, tmm, m)}
}

// tdpbf16ps returns TDPBF16PS tmm(acc), tmm(a), tmm(b) (Intel order): acc +=
// a b, a's rows pairs of K, b's rows pairs of K by columns.
// VEX.128.F3.0F38.W0 5C, acc in ModRM.reg, a in ModRM.rm, b in VEX.vvvv.
func tdpbf16ps(acc, a, b int) instruction {
	bytes := append(vex3(0, 0, 0, b, ppF3), 0x5c, 0xc0|byte(acc)<<3|byte(a))
	return instruction{att: fmt.Sprintf("tdpbf16ps %%tmm%d, %%tmm%d, %%tmm%d", b, a, acc), bytes: bytes}
}

// tilezero returns TILEZERO tmm.
func tilezero(tmm int) instruction {
	return instruction{att: fmt.Sprintf("tilezero %%tmm%d", tmm), bytes: append(vex3(0, 0, 0, 0, ppF2), 0x49, 0xc0|byte(tmm)<<3)}
}

// tilerelease returns TILERELEASE: the tiles back to their initial state.
func tilerelease() instruction {
	return instruction{att: "tilerelease", bytes: append(vex3(0, 0, 0, 0, ppNone), 0x49, 0xc0)}
}

// encodingTable is every form the encoder writes, over every register in
// each position and each kind of displacement, for TestEncodings.
func encodingTable() []instruction {
	var t []instruction
	for i := 0; i < 32; i++ {
		t = append(t, vdpbf16ps(i, 28, 29), vdpbf16ps(0, i, 29), vdpbf16ps(0, 28, i), vdpbf16ps(i, (i+7)%32, (i+19)%32))
	}
	for acc := 0; acc < 8; acc++ {
		for a := 0; a < 8; a++ {
			for b := 0; b < 8; b++ {
				if acc != a && a != b && acc != b {
					t = append(t, tdpbf16ps(acc, a, b))
				}
			}
		}
		t = append(t, tilezero(acc))
	}
	t = append(t, tilerelease())
	for r := 0; r < 16; r++ {
		for _, d := range []int32{0, 64, -64, 4096} {
			t = append(t, ldtilecfg(mem{r, -1, d}))
			idx := (r + 3) % 16
			if idx == 4 {
				idx = 0
			}
			for _, m := range []mem{{r, idx, d}, {idx, r, d}} {
				if m.index == 4 {
					continue
				}
				t = append(t, tileloadd(r%8, m), tilestored(m, (r+5)%8))
			}
		}
	}
	return t
}
