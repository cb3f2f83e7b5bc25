package main

import (
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/encodings.golden (needs GNU as, which must agree)")

const golden = "testdata/encodings.golden"

// emitted returns every instruction the generator writes as bytes, read
// back from its output: the BYTE directives and the assembler text in
// their comment.
func emitted(t *testing.T) []instruction {
	out.Reset()
	avx512Kernel(bf16Variant)
	amxKernel()
	text := out.String()
	out.Reset()
	var ins []instruction
	byteRe := regexp.MustCompile(`BYTE \$0x([0-9a-f]{2})`)
	for _, line := range strings.Split(text, "\n") {
		code, comment, ok := strings.Cut(line, "// ")
		if !ok || !strings.Contains(code, "BYTE $") {
			continue
		}
		var b []byte
		for _, m := range byteRe.FindAllStringSubmatch(code, -1) {
			var v byte
			fmt.Sscanf(m[1], "%x", &v)
			b = append(b, v)
		}
		ins = append(ins, instruction{att: strings.TrimSpace(comment), bytes: b})
	}
	if len(ins) == 0 {
		t.Fatal("the generator wrote no BYTE-encoded instruction")
	}
	return ins
}

// assemble runs GNU as on the instructions and returns its .text bytes.
func assemble(t *testing.T, asm string, ins []instruction) []byte {
	t.Helper()
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString(".text\n")
	for _, in := range ins {
		src.WriteString(in.att + "\n")
	}
	s, o := filepath.Join(dir, "enc.s"), filepath.Join(dir, "enc.o")
	if err := os.WriteFile(s, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(asm, "--64", "-o", o, s).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", asm, err, msg)
	}
	f, err := elf.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := f.Section(".text").Data()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// compare fails at the first instruction whose bytes differ from got's.
func compare(t *testing.T, what string, ins []instruction, got []byte) {
	t.Helper()
	off := 0
	for _, in := range ins {
		end := off + len(in.bytes)
		if end > len(got) || !bytes.Equal(got[off:end], in.bytes) {
			t.Fatalf("%s: %s encodes as % x, %s has % x", what, in.att, in.bytes, what, got[off:min(end, len(got))])
		}
		off = end
	}
	if off != len(got) {
		t.Fatalf("%s: %d bytes, the encoder %d", what, len(got), off)
	}
}

func lines(ins []instruction) string {
	var s strings.Builder
	for _, in := range ins {
		fmt.Fprintf(&s, "%s\t% x\n", in.att, in.bytes)
	}
	return s.String()
}

// TestEncodings checks the encoder's table (every register in every
// position) and every instruction the generator writes as bytes against GNU
// as where it is installed, and both against testdata/encodings.golden
// (written by -update from a run that agreed with as) everywhere.
func TestEncodings(t *testing.T) {
	all := append(encodingTable(), emitted(t)...)
	asm, err := exec.LookPath("as")
	if err == nil {
		compare(t, "GNU as", all, assemble(t, asm, all))
	} else {
		t.Logf("no GNU as on PATH: the encodings are checked against %s only", golden)
	}
	if *update {
		if err != nil {
			t.Fatal("-update needs GNU as to check the encodings against")
		}
		if err := os.WriteFile(golden, []byte(lines(all)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(all); got != string(want) {
		t.Fatalf("the encodings differ from %s (rerun with -update where GNU as is installed)", golden)
	}
}
