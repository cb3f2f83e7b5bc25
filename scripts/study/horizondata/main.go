// Command horizondata makes the token shards of the horizon study (issue
// 26): a byte-level BPE of -vocab tokens (package tokenizer/smallbpe)
// trained on the training text only, and llm.c shards encoded with it.
//
// Each input file (plain or gzip text, read as hilbert prepare reads it) is
// cut at the first line start after 1 - -val-frac of its bytes; the tail is
// held out, so validation is text no run trains on (a whole passage at the
// end of each book, not paragraphs scattered through it), and the head, in
// file order, is training text. Both are split into blank-line-separated
// paragraphs, one document each, as hilbert prepare splits them. The BPE
// learns its merges from the training paragraphs. Token 0 (NUL) precedes
// every paragraph, as in the oracle study.
//
// It writes, in -out:
//   - bpe<V>.txt: the merges;
//   - bpe<V>_train_000000.bin: the training tokens;
//   - bpe<V>_val_000000.bin: the held-out tokens, file after file;
//   - valchunks/bpe<V>_val_NNNNNN.bin: the same held-out tokens cut into
//     -chunks contiguous pieces of whole sequences, for the standard error
//     of a validation loss by batch means (run.sh evaluates each finished
//     run on them, horizonplot reads the losses);
//   - valchunks/sources.tsv: each piece's source file;
//   - data.md: what was written (bytes, tokens, tokens per byte per file).
//
// Every folder gets its manifest (data.WriteShard). Existing files are
// kept: rerunning with the same inputs writes only what is missing.
//
// usage: go run ./scripts/study/horizondata -out DIR [-vocab 1024] [-val-frac 0.08] FILE...
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/tokenizer/smallbpe"
)

// config is the command line: the flags and the input files.
type config struct {
	out            string
	vocab          int
	valFrac        float64
	chunks, seqLen int
	files          []string
}

// split is one input file cut into training and held-out paragraphs, with
// their bytes and (once encoded) tokens.
type split struct {
	name             string
	train, val       []string
	trainB, valB     int
	trainTok, valTok int
}

// main reads and cuts the files, trains the BPE and writes the merges,
// shards, pieces and data.md into -out (what is there is kept), and
// prints data.md.
func main() {
	cfg := parseFlags()
	files, trainDocs := readSplits(cfg)
	start := time.Now()
	bpe, err := smallbpe.Train(cfg.vocab, trainDocs...)
	if err != nil {
		log.Fatal(err)
	}
	trained := time.Since(start)
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		log.Fatal(err)
	}
	prefix := fmt.Sprintf("bpe%d", cfg.vocab)
	if merges := filepath.Join(cfg.out, prefix+".txt"); !exists(merges) {
		if err := bpe.Save(merges); err != nil {
			log.Fatal(err)
		}
	}
	trainToks, valToks := encode(bpe.Encoder(), files)
	per := writePieces(cfg, prefix, valToks, files)
	writeShard(filepath.Join(cfg.out, prefix+"_val_000000.bin"), valToks)
	writeShard(filepath.Join(cfg.out, prefix+"_train_000000.bin"), trainToks)
	md := report(cfg, bpe, trained, files, len(valToks), per)
	writeFile(filepath.Join(cfg.out, "data.md"), md)
	fmt.Print(md)
}

// parseFlags reads the command line; a missing -out or input file, or a
// -val-frac outside (0, 1), ends the command.
func parseFlags() config {
	out := flag.String("out", "", "folder for the shards (required)")
	vocab := flag.Int("vocab", 1024, "BPE vocabulary size")
	valFrac := flag.Float64("val-frac", 0.08, "share of each file's bytes, at its end, held out for validation")
	chunks := flag.Int("chunks", 64, "contiguous validation pieces for the standard error")
	seqLen := flag.Int("seq-len", 128, "sequence length the pieces are cut in")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		log.Fatal("usage: horizondata -out DIR [-vocab 1024] [-val-frac 0.08] FILE...")
	}
	if *valFrac <= 0 || *valFrac >= 1 {
		log.Fatalf("-val-frac %g: want a share in (0, 1)", *valFrac)
	}
	return config{out: *out, vocab: *vocab, valFrac: *valFrac, chunks: *chunks, seqLen: *seqLen, files: flag.Args()}
}

// readSplits reads every input file and cuts it (see cut) into training
// and held-out paragraphs; it returns the files' splits and all training
// paragraphs in file order. A file too short to give both ends the command.
func readSplits(cfg config) ([]*split, []string) {
	var files []*split
	var trainDocs []string
	for _, p := range cfg.files {
		text, err := data.ReadText(p)
		if err != nil {
			log.Fatal(err)
		}
		text = strings.ReplaceAll(text, "\r\n", "\n")
		at := cut(text, cfg.valFrac)
		s := &split{name: filepath.Base(p)}
		s.train, s.trainB = paragraphs(text[:at])
		s.val, s.valB = paragraphs(text[at:])
		if len(s.val) == 0 || len(s.train) == 0 {
			log.Fatalf("%s: too short to hold out %g of it", p, cfg.valFrac)
		}
		trainDocs = append(trainDocs, s.train...)
		files = append(files, s)
	}
	return files, trainDocs
}

// cut is where text's held-out tail starts: the first line start at or
// after (1 - valFrac) of the bytes, or the end (a file without blank
// lines, as tdavid, is one paragraph).
func cut(text string, valFrac float64) int {
	at := int(float64(len(text)) * (1 - valFrac))
	if i := strings.IndexByte(text[at:], '\n'); i >= 0 {
		return at + i + 1
	}
	return len(text)
}

// encode encodes the training and the held-out paragraphs of every file,
// file after file, and records each file's token counts.
func encode(enc func(dst []int32, doc string) []int32, files []*split) (train, val []int32) {
	for _, s := range files {
		n := len(train)
		for _, d := range s.train {
			train = enc(train, d)
		}
		s.trainTok = len(train) - n
		n = len(val)
		for _, d := range s.val {
			val = enc(val, d)
		}
		s.valTok = len(val) - n
	}
	return train, val
}

// writePieces writes the held-out tokens as cfg.chunks contiguous pieces
// into out/valchunks, with sources.tsv, and returns the sequences a
// piece holds. The validation loader reads sequences of seqLen+1 tokens;
// a piece holds whole sequences plus the one token that the last target
// needs.
func writePieces(cfg config, prefix string, valToks []int32, files []*split) int {
	seqs := (len(valToks) - 1) / cfg.seqLen
	per := seqs / cfg.chunks
	if per < 1 {
		log.Fatalf("%d validation tokens: too few for %d pieces of sequences of %d", len(valToks), cfg.chunks, cfg.seqLen)
	}
	chunkDir := filepath.Join(cfg.out, "valchunks")
	if err := os.MkdirAll(chunkDir, 0o755); err != nil {
		log.Fatal(err)
	}
	// sources.tsv: each piece's source file (the one holding its middle
	// token), for the stratified standard error.
	var src strings.Builder
	src.WriteString("piece\tfile\n")
	for c := range cfg.chunks {
		lo := c * per * cfg.seqLen
		hi := lo + per*cfg.seqLen + 1
		writeShard(filepath.Join(chunkDir, fmt.Sprintf("%s_val_%06d.bin", prefix, c)), valToks[lo:hi])
		fmt.Fprintf(&src, "%d\t%s\n", c, sourceOf((lo+hi)/2, files))
	}
	writeFile(filepath.Join(chunkDir, "sources.tsv"), src.String())
	return per
}

// sourceOf is the name of the file whose held-out tokens hold token i of
// the held-out stream ("" past the end, which writePieces never asks).
func sourceOf(i int, files []*split) string {
	at := 0
	for _, s := range files {
		if i < at+s.valTok {
			return s.name
		}
		at += s.valTok
	}
	return ""
}

// report is data.md: the command, the BPE, the bytes and tokens per file
// and the held-out pieces (valToks tokens, per sequences a piece).
func report(cfg config, bpe *smallbpe.BPE, trained time.Duration, files []*split, valToks, per int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Horizon study data\n\nMade by `go run ./scripts/study/horizondata -out DIR -vocab %d -val-frac %g -chunks %d -seq-len %d %s`.\n\n",
		cfg.vocab, cfg.valFrac, cfg.chunks, cfg.seqLen, strings.Join(baseNames(cfg.files), " "))
	fmt.Fprintf(&b, "BPE: %d tokens (256 bytes + %d merges), trained on the training paragraphs only in %.1f s; token 0 (NUL) before every paragraph.\n\n",
		bpe.VocabSize(), bpe.VocabSize()-smallbpe.ByteTokens, trained.Seconds())
	b.WriteString("| file | train bytes | train tokens | val bytes | val tokens | tokens per byte |\n|---|---|---|---|---|---|\n")
	var tb, tt, vb, vt int
	for _, s := range files {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.3f |\n", s.name, s.trainB, s.trainTok, s.valB, s.valTok,
			float64(s.trainTok+s.valTok)/float64(s.trainB+s.valB))
		tb, tt, vb, vt = tb+s.trainB, tt+s.trainTok, vb+s.valB, vt+s.valTok
	}
	fmt.Fprintf(&b, "| all | %d | %d | %d | %d | %.3f |\n\n", tb, tt, vb, vt, float64(tt+vt)/float64(tb+vb))
	fmt.Fprintf(&b, "Validation: the last %g of each file's bytes (whole paragraphs), %d tokens = %d sequences of %d; valchunks/ holds them as %d contiguous pieces of %d sequences each (%d tokens).\n",
		cfg.valFrac, valToks, (valToks-1)/cfg.seqLen, cfg.seqLen, cfg.chunks, per, per*cfg.seqLen)
	return b.String()
}

// exists says whether a file is at path.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// writeShard writes tokens as a shard at path unless a file is there.
func writeShard(path string, tokens []int32) {
	if exists(path) {
		return
	}
	if err := data.WriteShard(path, tokens, false); err != nil {
		log.Fatal(err)
	}
}

// writeFile writes text at path unless a file is there.
func writeFile(path, text string) {
	if exists(path) {
		return
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		log.Fatal(err)
	}
}

// paragraphs splits text into its non-blank blank-line-separated
// paragraphs and returns them with their total length.
func paragraphs(text string) ([]string, int) {
	var out []string
	n := 0
	for _, para := range strings.Split(text, "\n\n") {
		if strings.TrimSpace(para) != "" {
			out = append(out, para)
			n += len(para)
		}
	}
	return out, n
}

// baseNames are the paths' last elements.
func baseNames(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}
