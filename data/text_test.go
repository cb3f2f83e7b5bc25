package data

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/tokenizer"
)

// paragraphTokens is the reference of AddTextFile's rule: "\r\n" to "\n",
// split at "\n\n", blank paragraphs dropped, each encoded whole after
// EndOfText.
func paragraphTokens(t *testing.T, text string) []int32 {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for _, para := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		if strings.TrimSpace(para) != "" {
			out = append(append(out, tokenizer.EndOfText), tok.Encode(para)...)
		}
	}
	return out
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(b)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Small chunks put every boundary case (a "\r\n", a "\n\n", a UTF-8
// sequence or a paragraph cut by the chunk's end, long paragraphs encoded
// in pieces) into a short text; the tokens must equal the reference's.
func TestTextFileParagraphs(t *testing.T) {
	defer func(n int) { textChunk = n }(textChunk)
	pieces := []string{"a", "Bc", " ", "  ", "\n", "\n\n", "\r\n", "\r", "\t", "é", "日本", "'s", "123", ".", "\n \n"}
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for trial := range 40 {
		var sb strings.Builder
		for sb.Len() < 300+rng.IntN(1500) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
			if rng.IntN(30) == 0 {
				sb.WriteString(strings.Repeat("word ", 40+rng.IntN(60))) // a long paragraph
			}
		}
		text := sb.String()
		textChunk = []int{7, 16, 64, 1000, 1 << 20}[trial%5]
		p := filepath.Join(dir, "t.txt")
		data := []byte(text)
		if trial%2 == 1 {
			data = gzipped(t, data) // gzip, named .txt
		}
		os.WriteFile(p, data, 0o644)
		sum, err := BuildFromFiles(context.Background(), BuildConfig{Dir: t.TempDir()}, p)
		if err != nil {
			t.Fatal(err)
		}
		got, want := readAll(t, sum.TrainShards), paragraphTokens(t, text)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (chunk %d): %d tokens, expected %d, first difference at %d\ntext %q", trial, textChunk, len(got), len(want), diffAt(got, want), text)
		}
	}
}

func TestTextFileFormats(t *testing.T) {
	dir := t.TempDir()
	text := "One paragraph.\n\nAnother one, with ünïcödé.\r\n\r\nA third.\n"
	want := paragraphTokens(t, text)
	binary := make([]byte, 5000)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range binary {
		binary[i] = byte(rng.Uint32())
	}
	long := gzipped(t, []byte(strings.Repeat(text, 2000)))
	badCRC := slices.Clone(long)
	badCRC[len(badCRC)-8] ^= 1
	tests := []struct {
		name string
		data []byte
		want string // error; "" = the tokens of text
	}{
		{"plain.txt", []byte(text), ""},
		{"gzip.txt", gzipped(t, []byte(text)), ""}, // gzip told by its bytes
		{"plain.txt.gz", []byte(text), ""},         // not gzip despite the name
		{"multi.gz", append(gzipped(t, []byte(text[:20])), gzipped(t, []byte(text[20:]))...), ""}, // gzip members
		{"few-bad.txt", []byte("Caf\xe9 au lait.\n\nA NUL \x00 here."), "skip"},
		{"random.bin", binary, "not UTF-8 text"},
		{"nul.txt", make([]byte, 4096), "not UTF-8 text: 4096 NUL or invalid UTF-8 bytes in its first 4096 bytes"},
		{"random.gz", gzipped(t, binary), "not UTF-8 text"},
		{"x.zst", append([]byte{0x28, 0xb5, 0x2f, 0xfd}, binary[:100]...), "zstd-compressed"},
		{"x.xz", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, binary[:100]...), "xz-compressed"},
		{"broken.gz", []byte{0x1f, 0x8b, 8, 0, 1}, "gzip"},
		{"x.bz2", append([]byte("BZh91AY&SY"), binary[:100]...), "bzip2-compressed"},
		{"bzh.txt", []byte("BZh9 is how this text begins.\n"), "skip"}, // text, not bzip2
		// Truncated gzip: cut in the middle, or missing only its 8-byte trailer
		// (CRC-32 and length) or part of it; it used to read as the whole text.
		{"half.gz", long[:len(long)/2], "gzip stream truncated"},
		{"notrailer.gz", long[:len(long)-8], "gzip stream truncated"},
		{"halftrailer.gz", long[:len(long)-3], "gzip stream truncated"},
		{"badcrc.gz", badCRC, "gzip stream damaged"},
	}
	for _, tc := range tests {
		p := filepath.Join(dir, tc.name)
		os.WriteFile(p, tc.data, 0o644)
		sum, err := BuildFromTextFiles(context.Background(), BuildConfig{Dir: t.TempDir()}, p)
		switch tc.want {
		case "":
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if got := readAll(t, sum.TrainShards); !slices.Equal(got, want) {
				t.Errorf("%s: %d tokens, expected the text's %d", tc.name, len(got), len(want))
			}
		case "skip": // a stray byte or two is not binary
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %v, expected an error naming the file with %q", tc.name, err, tc.want)
			}
		}
	}
}

// TestOpenTextTruncatedGzip: every reader of OpenText (train -text,
// prepare, the oracle) sees a truncated gzip as an error, not as the end.
func TestOpenTextTruncatedGzip(t *testing.T) {
	full := gzipped(t, []byte(strings.Repeat("Light is a wave. ", 5000)))
	for _, cut := range []int{len(full) / 3, len(full) - 8, len(full) - 1} {
		p := filepath.Join(t.TempDir(), "t.gz")
		os.WriteFile(p, full[:cut], 0o644)
		r, err := OpenText(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(r)
		r.Close()
		if err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("cut at %d of %d bytes: %v, expected a truncated-gzip error", cut, len(full), err)
		}
	}
}

// TestTextFileLongLines: paragraphs of one long line (no '\n' to cut at),
// some of them blank or beginning with a long blank part, give the tokens
// of each whole paragraph, and reading them is not quadratic: pending text
// is cut at piece ends, where it used to grow and be copied whole for
// every chunk (a 2 MB line in 4 KB chunks copied about 500 MB).
func TestTextFileLongLines(t *testing.T) {
	defer func(n int) { textChunk = n }(textChunk)
	textChunk = 4096
	long := strings.Repeat("a", 3*tokenizer.MaxPieceRunes+5)
	tests := []struct{ name, text string }{
		{"letters", "Intro.\n\n" + long + " end\n\nOutro"},
		{"words", strings.Repeat("Light is a wave; ", 120000)},
		{"blank paragraph", "Before.\n\n" + strings.Repeat(" ", 2000000) + "\n\nAfter."},
		{"blank at the end", "Before.\n\n" + strings.Repeat(" \t", 1000000)},
		{"blank start", "Before.\n\n" + strings.Repeat(" ", 2000000) + "word" + long},
		{"blank start at the end", strings.Repeat("  \n ", 500000) + "last"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		p := filepath.Join(dir, "t.txt")
		os.WriteFile(p, []byte(tc.text), 0o644)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		sum, err := BuildFromTextFiles(context.Background(), BuildConfig{Dir: t.TempDir()}, p)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got, want := readAll(t, sum.TrainShards), paragraphTokens(t, tc.text); !slices.Equal(got, want) {
			t.Errorf("%s: %d tokens, expected %d, first difference at %d", tc.name, len(got), len(want), diffAt(got, want))
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
			t.Errorf("%s: reading %d bytes allocated %d MB", tc.name, len(tc.text), alloc>>20)
		}
	}
}
