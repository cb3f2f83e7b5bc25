package data

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/hilbert-ml/hilbert/internal/testcorpus"
	"github.com/hilbert-ml/hilbert/tokenizer"
)

// testDocs has nulls (nil) among texts in several scripts.
func testDocs() []*string {
	s := func(v string) *string { return &v }
	return []*string{
		s("Hello world. This is the first document."), nil, s("Ünïcödé, 日本語, emoji 👍🏽 and CRLF\r\nlines."),
		s(""), s("  leading spaces\n\n\nand newlines  "), nil, s(strings.Repeat("long text ", 500)),
		s("<|endoftext|> stays text"), s("x"), nil, s("last one\u2028with U+2028"),
	}
}

// expected returns what the shards should hold, split by ValEvery.
func expected(t testing.TB, docs []*string, valEvery int) (train, val []int32) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	d := 0
	for _, doc := range docs {
		if doc == nil {
			continue
		}
		ids := append([]int32{tokenizer.EndOfText}, tok.Encode(*doc)...)
		if valEvery > 0 && d%valEvery == 0 {
			val = append(val, ids...)
		} else {
			train = append(train, ids...)
		}
		d++
	}
	return train, val
}

// readAll concatenates the tokens of shards.
func readAll(t testing.TB, paths []string) []int32 {
	var out []int32
	for _, p := range paths {
		s, err := OpenShard(p, tokenizer.VocabSize)
		if err != nil {
			t.Fatal(err)
		}
		toks, err := s.Tokens()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range toks {
			out = append(out, int32(v))
		}
		s.Close()
	}
	return out
}

func stringColumn(large bool, docs []*string) arrow.Array {
	var b interface {
		Append(string)
		AppendNull()
		NewArray() arrow.Array
		Release()
	}
	if large {
		b = array.NewLargeStringBuilder(memory.DefaultAllocator)
	} else {
		b = array.NewStringBuilder(memory.DefaultAllocator)
	}
	defer b.Release()
	for _, d := range docs {
		if d == nil {
			b.AppendNull()
		} else {
			b.Append(*d)
		}
	}
	return b.NewArray()
}

// writeParquet writes docs as FineWeb-like rows (text, id) in row groups
// of 3 rows.
func writeParquet(t testing.TB, path string, large bool, docs []*string) {
	textType := arrow.DataType(arrow.BinaryTypes.String)
	if large {
		textType = arrow.BinaryTypes.LargeString
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: textType, Nullable: true},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(3)),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	for i := range docs {
		ib.Append(int64(i))
	}
	ids, text := ib.NewArray(), stringColumn(large, docs)
	rec := array.NewRecordBatch(schema, []arrow.Array{ids, text}, int64(len(docs)))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeArrow writes two record batches of column col in the IPC file or
// stream format.
func writeArrow(t testing.TB, path string, stream bool, name string, cols ...arrow.Array) {
	writeArrowWith(t, path, stream, name, nil, cols...)
}

// writeArrowWith is writeArrow with writer options (compression, say).
func writeArrowWith(t testing.TB, path string, stream bool, name string, opts []ipc.Option, cols ...arrow.Array) {
	schema := arrow.NewSchema([]arrow.Field{{Name: name, Type: cols[0].DataType(), Nullable: true}}, nil)
	opts = append([]ipc.Option{ipc.WithSchema(schema)}, opts...)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if stream {
		w = ipc.NewWriter(f, opts...)
	} else if w, err = ipc.NewFileWriter(f, opts...); err != nil {
		t.Fatal(err)
	}
	for _, c := range cols {
		if err := w.Write(array.NewRecordBatch(schema, []arrow.Array{c}, int64(c.Len()))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// tokenListColumn holds each document's tokens as list<int32>, nulls kept.
func tokenListColumn(t testing.TB, docs []*string) arrow.Array {
	tok, _ := tokenizer.GPT2()
	lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	vb := lb.ValueBuilder().(*array.Int32Builder)
	for _, d := range docs {
		if d == nil {
			lb.AppendNull()
			continue
		}
		lb.Append(true)
		vb.AppendValues(tok.Encode(*d), nil)
	}
	return lb.NewArray()
}

func TestBuildFromParquetAndArrow(t *testing.T) {
	docs := testDocs()
	in := t.TempDir()
	half := len(docs) / 2
	tests := []struct {
		name   string
		column string
		write  func(path string)
		file   string
	}{
		{"parquet string", "text", func(p string) { writeParquet(t, p, false, docs) }, "a.parquet"},
		{"parquet large_string", "text", func(p string) { writeParquet(t, p, true, docs) }, "b.parquet"},
		{"arrow file string", "text", func(p string) {
			writeArrow(t, p, false, "text", stringColumn(false, docs[:half]), stringColumn(false, docs[half:]))
		}, "c.arrow"},
		{"arrow stream large_string", "text", func(p string) {
			writeArrow(t, p, true, "text", stringColumn(true, docs[:half]), stringColumn(true, docs[half:]))
		}, "d.arrows"},
		{"arrow file token ids", "tokens", func(p string) {
			writeArrow(t, p, false, "tokens", tokenListColumn(t, docs[:half]), tokenListColumn(t, docs[half:]))
		}, "e.arrow"},
	}
	wantTrain, wantVal := expected(t, docs, 3)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(in, tc.file)
			tc.write(path)
			out := t.TempDir()
			var progress int64
			sum, err := BuildFromFiles(context.Background(), BuildConfig{
				Dir: out, ShardTokens: 100, Split: Split{ValEvery: 3}, Column: tc.column, BatchRows: 2,
				Progress: func(d int64) { progress += d },
			}, path)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Documents != 8 || sum.Nulls != 3 {
				t.Errorf("documents %d nulls %d, expected 8 and 3", sum.Documents, sum.Nulls)
			}
			if st, _ := os.Stat(path); progress != st.Size() {
				t.Errorf("progress reported %d bytes, file has %d", progress, st.Size())
			}
			if len(sum.TrainShards) < 2 {
				t.Errorf("expected several train shards, got %v", sum.TrainShards)
			}
			if got := readAll(t, sum.TrainShards); !slices.Equal(got, wantTrain) {
				t.Errorf("train tokens differ at %d (got %d tokens, expected %d)", diffAt(got, wantTrain), len(got), len(wantTrain))
			}
			if got := readAll(t, sum.ValShards); !slices.Equal(got, wantVal) {
				t.Errorf("val tokens differ at %d", diffAt(got, wantVal))
			}
			if sum.Tokens != int64(len(wantTrain)+len(wantVal)) {
				t.Errorf("summary tokens %d, expected %d", sum.Tokens, len(wantTrain)+len(wantVal))
			}
		})
	}
}

func diffAt(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestBuildRefusesOverwriteAndBadColumns(t *testing.T) {
	out := t.TempDir()
	cfg := BuildConfig{Dir: out, ShardTokens: 50}
	if _, err := BuildFromText(context.Background(), cfg, "one", "two"); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildFromText(context.Background(), cfg, "again"); !errors.Is(err, os.ErrExist) {
		t.Errorf("second build without Overwrite: got %v", err)
	}
	cfg.Overwrite = true
	sum, err := BuildFromText(context.Background(), cfg, "again")
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*")); len(m) != 2 || len(sum.TrainShards) != 1 {
		t.Errorf("after overwrite: files %v, expected one shard and the manifest", m)
	}
	if m, err := ReadManifest(out); err != nil || len(m.Shards) != 1 || m.Shards[0].File != filepath.Base(sum.TrainShards[0]) {
		t.Errorf("after overwrite: manifest %+v, %v; expected only %s", m, err, sum.TrainShards[0])
	}
	// Wrong column name and type.
	p := filepath.Join(t.TempDir(), "x.parquet")
	writeParquet(t, p, false, testDocs())
	for _, col := range []string{"nope", "id"} {
		cfg := BuildConfig{Dir: t.TempDir(), Column: col}
		if _, err := BuildFromFiles(context.Background(), cfg, p); err == nil || !strings.Contains(err.Error(), col) {
			t.Errorf("column %q: got %v", col, err)
		}
	}
}

func TestBuildValTokensSplit(t *testing.T) {
	tok, _ := tokenizer.GPT2()
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	sum, err := BuildFromText(context.Background(), BuildConfig{Dir: t.TempDir(), Split: Split{ValTokens: 101}}, text)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]int32{tokenizer.EndOfText}, tok.Encode(text)...)
	if got := readAll(t, sum.ValShards); !slices.Equal(got, all[:101]) {
		t.Errorf("val shard: %d tokens, expected the first 101", len(got))
	}
	if got := readAll(t, sum.TrainShards); !slices.Equal(got, all[101:]) {
		t.Errorf("train shard: %d tokens, expected the rest", len(got))
	}
}

// TestAustenShardDecodesToText writes austen.txt.gz through the streaming
// text path and compares the shard with a plain reference: the whole text
// split at blank lines, each paragraph encoded whole after EndOfText.
func TestAustenShardDecodesToText(t *testing.T) {
	path := filepath.Join(testcorpus.Dir(t), "austen.txt.gz")
	sum, err := BuildFromFiles(context.Background(), BuildConfig{Dir: t.TempDir()}, path)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	z, _ := gzip.NewReader(f)
	text, _ := io.ReadAll(z)
	tok, _ := tokenizer.GPT2()
	var want []int32
	docs := 0
	for _, para := range strings.Split(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n\n") {
		if strings.TrimSpace(para) != "" {
			want = append(append(want, tokenizer.EndOfText), tok.Encode(para)...)
			docs++
		}
	}
	got := readAll(t, sum.TrainShards)
	if sum.Documents != docs || !slices.Equal(got, want) {
		t.Fatalf("shard holds %d documents, %d tokens (first difference at %d); expected %d and %d", sum.Documents, len(got), diffAt(got, want), docs, len(want))
	}
}

// TestBuildTokenOutOfRange: a token id outside the vocabulary is refused
// with the value the file holds (a uint64 of 2^63 once read as -1).
func TestBuildTokenOutOfRange(t *testing.T) {
	tests := []struct {
		name string
		typ  arrow.DataType
		add  func(b array.Builder)
		want string
	}{
		{"uint64 2^63", arrow.PrimitiveTypes.Uint64, func(b array.Builder) { b.(*array.Uint64Builder).AppendValues([]uint64{5, 1 << 63}, nil) }, "got 9223372036854775808"},
		{"uint64 max", arrow.PrimitiveTypes.Uint64, func(b array.Builder) { b.(*array.Uint64Builder).AppendValues([]uint64{5, 1<<64 - 1}, nil) }, "got 18446744073709551615"},
		{"int32 vocab size", arrow.PrimitiveTypes.Int32, func(b array.Builder) { b.(*array.Int32Builder).AppendValues([]int32{5, 50257}, nil) }, "got 50257"},
		{"int64 negative", arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).AppendValues([]int64{5, -3}, nil) }, "got -3"},
		{"null id", arrow.PrimitiveTypes.Int32, func(b array.Builder) { b.(*array.Int32Builder).AppendValues([]int32{5, 0}, []bool{true, false}) }, "got (null)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lb := array.NewListBuilder(memory.DefaultAllocator, tc.typ)
			lb.Append(true)
			tc.add(lb.ValueBuilder())
			path := filepath.Join(t.TempDir(), "t.arrow")
			writeArrow(t, path, false, "tokens", lb.NewArray())
			_, err := BuildFromFiles(context.Background(), BuildConfig{Dir: t.TempDir(), Column: "tokens"}, path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "row 0 token 1") {
				t.Errorf("got %v, expected an error with %q at row 0 token 1", err, tc.want)
			}
		})
	}
}
