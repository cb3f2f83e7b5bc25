package data

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hilbert-ml/hilbert/tokenizer"
)

// DefaultShardTokens is llm.c's shard size for FineWeb: 100M tokens.
const DefaultShardTokens = 100_000_000

// Split is the rule that sends documents to the validation shards. With both
// fields zero there is no validation split.
type Split struct {
	// ValTokens sends the first ValTokens tokens of the token stream to
	// validation, cutting the document that crosses the mark, as llm.c does
	// (its shard 000000 is the validation shard). To validate on the first N
	// tokens with sequences of T, make ValTokens at least N+1.
	ValTokens int
	// ValEvery sends document d (counted from 0 across all inputs) to
	// validation when d%ValEvery == 0.
	ValEvery int
}

// BuildConfig says where shards go and how inputs are read.
type BuildConfig struct {
	// Dir receives the shards, named Prefix_val_NNNNNN.bin and
	// Prefix_train_NNNNNN.bin; it is created if needed.
	Dir string
	// Prefix starts every shard name; "" means "fineweb".
	Prefix string
	// ShardTokens is the number of tokens per shard (the last of each split
	// may be shorter); 0 means DefaultShardTokens. Documents may straddle
	// shards.
	ShardTokens int
	// Split sends part of the documents to validation.
	Split Split
	// Overwrite allows replacing existing shards with this prefix in Dir
	// (they are deleted first); otherwise Build refuses to start.
	Overwrite bool
	// Column names the Parquet/Arrow column to read: a string or large_string
	// column of text, or a list or large_list of integer token ids.
	// "" means "text".
	Column string
	// BatchRows is the number of rows per record batch read from Parquet;
	// 0 means 1024.
	BatchRows int
	// Progress, if set, is called with the number of input bytes (on disk)
	// consumed since the last call.
	Progress func(delta int64)
	// Tokenizer encodes text; nil means tokenizer.GPT2().
	Tokenizer *tokenizer.Tokenizer
}

// Summary reports what a build wrote.
type Summary struct {
	Documents   int           // documents written
	Nulls       int           // null rows skipped
	Tokens      int64         // tokens written, EndOfText included
	TextBytes   int64         // bytes of text tokenized
	TrainShards []string      // paths of the training shards
	ValShards   []string      // paths of the validation shards
	ValTokens   int64         // tokens in the validation shards
	Elapsed     time.Duration // wall time from NewBuilder to Close
}

// Builder writes a set of shards from documents added one after another. It
// is not safe for concurrent use; the tokenizer inside it runs in parallel.
type Builder struct {
	cfg   BuildConfig
	tok   *tokenizer.Tokenizer
	train stream
	val   stream
	sum   Summary
	start time.Time
	err   error
}

// stream is one split's sequence of shards.
type stream struct {
	dir, name string // name: prefix_train or prefix_val
	split     string // train or val
	size      int
	overwrite bool
	next      int
	w         *ShardWriter
	paths     []string
	entries   []ManifestShard // of the finished shards
}

// NewBuilder checks the configuration and the output directory.
func NewBuilder(cfg BuildConfig) (*Builder, error) {
	cfg.Prefix = cmp.Or(cfg.Prefix, "fineweb")
	cfg.ShardTokens = cmp.Or(cfg.ShardTokens, DefaultShardTokens)
	cfg.Column = cmp.Or(cfg.Column, "text")
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 1024
	}
	switch {
	case cfg.Dir == "":
		return nil, fmt.Errorf("data: build: Dir: expected a directory, got \"\"")
	case cfg.ShardTokens < 0 || cfg.ShardTokens > MaxShardTokens:
		return nil, fmt.Errorf("data: build: ShardTokens: expected 1..%d, got %d", MaxShardTokens, cfg.ShardTokens)
	case cfg.Split.ValTokens < 0 || cfg.Split.ValEvery < 0:
		return nil, fmt.Errorf("data: build: Split: expected non-negative fields, got %+v", cfg.Split)
	}
	tok := cfg.Tokenizer
	if tok == nil {
		var err error
		if tok, err = tokenizer.GPT2(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("data: build: %w", err)
	}
	old, err := filepath.Glob(filepath.Join(cfg.Dir, cfg.Prefix+"_*.bin"))
	if err != nil {
		return nil, fmt.Errorf("data: build: %w", err)
	}
	if len(old) > 0 && !cfg.Overwrite {
		return nil, fmt.Errorf("data: build: %s holds %d shards named %s_*.bin (first %s): %w; allow overwriting to replace them",
			cfg.Dir, len(old), cfg.Prefix, filepath.Base(old[0]), os.ErrExist)
	}
	// The manifest stops listing the old shards before they go, so that
	// it never lists a shard that is not there.
	gone := map[string]bool{}
	for _, p := range old {
		gone[filepath.Base(p)] = true
	}
	if len(gone) > 0 {
		if err := updateManifest(cfg.Dir, func(m *Manifest) {
			m.Shards = slices.DeleteFunc(m.Shards, func(e ManifestShard) bool { return gone[e.File] })
		}); err != nil {
			return nil, fmt.Errorf("data: build: %w", err)
		}
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("data: build: %w", err)
		}
	}
	mk := func(kind string) stream {
		return stream{dir: cfg.Dir, name: cfg.Prefix + "_" + kind, split: kind, size: cfg.ShardTokens, overwrite: cfg.Overwrite}
	}
	return &Builder{cfg: cfg, tok: tok, train: mk("train"), val: mk("val"), start: time.Now()}, nil
}

// write appends tokens to the stream, rolling over to a new shard when full.
func (s *stream) write(tokens []int32) error {
	for len(tokens) > 0 {
		if s.w == nil {
			w, err := CreateShard(filepath.Join(s.dir, fmt.Sprintf("%s_%06d.bin", s.name, s.next)), s.overwrite)
			if err != nil {
				return err
			}
			s.w, s.next = w, s.next+1
		}
		n := min(len(tokens), s.size-int(s.w.Len()))
		if err := s.w.Write(tokens[:n]); err != nil {
			return err
		}
		tokens = tokens[n:]
		if int(s.w.Len()) == s.size {
			if err := s.close(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *stream) close() error {
	if s.w == nil {
		return nil
	}
	w := s.w
	s.w = nil
	if err := w.Close(); err != nil {
		return err
	}
	s.paths = append(s.paths, w.Path())
	e := w.entry()
	e.Split = s.split
	s.entries = append(s.entries, e)
	return nil
}

func (s *stream) abort() {
	if s.w != nil {
		s.w.Abort()
		s.w = nil
	}
}

var eot = []int32{tokenizer.EndOfText}

// beginDocument starts document d and returns the stream it goes to, after
// writing its leading EndOfText.
func (b *Builder) beginDocument() (toVal bool, err error) {
	d := b.sum.Documents
	b.sum.Documents++
	toVal = b.cfg.Split.ValEvery > 0 && d%b.cfg.Split.ValEvery == 0
	return toVal, b.emit(eot, toVal)
}

// emit writes a document's tokens to its split, or, under Split.ValTokens,
// the part of them that still fits into validation.
func (b *Builder) emit(tokens []int32, toVal bool) error {
	if b.err != nil {
		return b.err
	}
	b.sum.Tokens += int64(len(tokens))
	if !toVal {
		if room := int64(b.cfg.Split.ValTokens) - b.sum.ValTokens; room > 0 {
			n := int(min(room, int64(len(tokens))))
			if b.err = b.val.write(tokens[:n]); b.err != nil {
				return b.err
			}
			b.sum.ValTokens += int64(n)
			tokens = tokens[n:]
		}
		b.err = b.train.write(tokens)
		return b.err
	}
	b.sum.ValTokens += int64(len(tokens))
	b.err = b.val.write(tokens)
	return b.err
}

// AddText tokenizes one document and writes it after an EndOfText.
func (b *Builder) AddText(text string) error {
	return b.AddTokens(b.tok.EncodeParallel(text, 0), int64(len(text)))
}

// AddTexts tokenizes documents in parallel and writes them in order.
func (b *Builder) AddTexts(texts []string) error {
	var n int64
	for _, t := range texts {
		n += int64(len(t))
	}
	for _, ids := range b.tok.EncodeBatch(texts) {
		if err := b.AddTokens(ids, 0); err != nil {
			return err
		}
	}
	b.sum.TextBytes += n
	return nil
}

// AddTokens writes one already tokenized document after an EndOfText;
// textBytes is the size of the text it came from, for the summary.
func (b *Builder) AddTokens(tokens []int32, textBytes int64) error {
	toVal, err := b.beginDocument()
	if err != nil {
		return err
	}
	b.sum.TextBytes += textBytes
	return b.emit(tokens, toVal)
}

// ErrNoTraining is the error of a build whose split sent every token to
// validation.
var ErrNoTraining = errors.New("no training shards")

// Close finishes the last shards, writes the folder's manifest
// (ManifestName) listing them, and returns the summary. The manifest is
// written last, so a build that fails or is killed leaves none for its
// shards. After an error the shard being written is discarded; finished
// shards stay. A split that leaves no training token is an error wrapping
// ErrNoTraining.
func (b *Builder) Close() (Summary, error) {
	if b.err != nil {
		b.train.abort()
		b.val.abort()
		return b.sum, b.err
	}
	if err := b.val.close(); err != nil {
		b.train.abort()
		return b.sum, err
	}
	if err := b.train.close(); err != nil {
		return b.sum, err
	}
	b.sum.TrainShards, b.sum.ValShards = b.train.paths, b.val.paths
	b.sum.Elapsed = time.Since(b.start)
	if sp := b.cfg.Split; (sp.ValTokens > 0 || sp.ValEvery > 0) && len(b.train.paths) == 0 {
		if sp.ValEvery > 0 {
			return b.sum, fmt.Errorf("data: build: %w: the split (every %d-th document, first %d tokens) sends all %d tokens to validation", ErrNoTraining, sp.ValEvery, sp.ValTokens, b.sum.Tokens)
		}
		return b.sum, fmt.Errorf("data: build: %w: validation takes the first %d tokens, at or above the input's %d", ErrNoTraining, sp.ValTokens, b.sum.Tokens)
	}
	err := updateManifest(b.cfg.Dir, func(m *Manifest) {
		for _, e := range append(b.val.entries, b.train.entries...) {
			m.put(e)
		}
	})
	if err != nil {
		return b.sum, fmt.Errorf("data: build: %w", err)
	}
	return b.sum, nil
}

// Abort discards the shards being written (finished ones stay).
func (b *Builder) Abort() {
	b.train.abort()
	b.val.abort()
}

// BuildFromText writes shards from in-memory documents, each one preceded by
// EndOfText. A trainer with a plain text file can call it with the file's
// text and cfg.Split.ValTokens set to split off validation, then train on
// Summary.TrainShards and validate on Summary.ValShards[0].
func BuildFromText(ctx context.Context, cfg BuildConfig, docs ...string) (Summary, error) {
	return buildFrom(ctx, cfg, docs, func(b *Builder, ctx context.Context, d string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return b.AddText(d)
	})
}

// BuildFromFiles writes shards from input files, chosen by extension:
// .parquet (Parquet), .arrow, .arrows, .ipc, .feather (Arrow IPC file or
// stream), anything else a text file read by AddTextFile (plain or gzip
// UTF-8, one document per blank-line-separated paragraph).
func BuildFromFiles(ctx context.Context, cfg BuildConfig, paths ...string) (Summary, error) {
	return buildFrom(ctx, cfg, paths, (*Builder).AddFile)
}

// BuildFromTextFiles writes shards from text files read by AddTextFile,
// whatever their names.
func BuildFromTextFiles(ctx context.Context, cfg BuildConfig, paths ...string) (Summary, error) {
	return buildFrom(ctx, cfg, paths, (*Builder).AddTextFile)
}

// buildFrom writes shards from inputs (files or documents), each ingested
// by add; an error discards the shards being written (Abort).
func buildFrom(ctx context.Context, cfg BuildConfig, inputs []string, add func(*Builder, context.Context, string) error) (Summary, error) {
	b, err := NewBuilder(cfg)
	if err != nil {
		return Summary{}, err
	}
	for _, in := range inputs {
		if err := add(b, ctx, in); err != nil {
			b.Abort()
			return b.sum, err
		}
	}
	return b.Close()
}

// AddFile ingests one input file as BuildFromFiles does.
func (b *Builder) AddFile(ctx context.Context, path string) error {
	switch filepath.Ext(path) {
	case ".parquet":
		return b.AddParquet(ctx, path)
	case ".arrow", ".arrows", ".ipc", ".feather":
		return b.AddArrow(ctx, path)
	}
	return b.AddTextFile(ctx, path)
}
