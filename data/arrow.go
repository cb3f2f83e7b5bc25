package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/hilbert-ml/hilbert/internal/regfile"
)

// malformed turns a panic of the Parquet or Arrow reader into an error
// naming the file: arrow-go trusts fields of the file that a damaged one
// gets wrong (a data page without its header, say, which it dereferences),
// and the arrays it reads from an Arrow file hold offsets it does not
// check. Deferred by AddParquet and AddArrow.
func malformed(kind, path string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("data: %s %s: malformed file (reading it failed: %v)", kind, path, r)
	}
}

// AddParquet ingests the column cfg.Column of a Parquet file, one document
// per non-null row, streaming record batches of cfg.BatchRows rows. A
// malformed file is an error naming it.
func (b *Builder) AddParquet(ctx context.Context, path string) (err error) {
	defer malformed("parquet", path, &err)
	f, err := regfile.Open(path)
	if err != nil {
		return fmt.Errorf("data: parquet: %w", err)
	}
	pf, err := file.NewParquetReader(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("data: parquet %s: %w", path, err)
	}
	defer pf.Close()
	// The Arrow schema that Arrow's writers keep in the file's metadata
	// (ARROW:schema, an IPC message in base64) is ignored: the column's
	// Parquet types give its Arrow type (a string or a list of integers,
	// all this reads), and arrow-go decodes that message without checking
	// its lengths, so a damaged one made it ask for tens of GB (a fatal
	// out-of-memory error, found by FuzzParquet).
	for _, kv := range pf.MetaData().KeyValueMetadata() {
		if kv != nil && kv.Key == "ARROW:schema" {
			kv.Value = nil
		}
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(b.cfg.BatchRows)}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("data: parquet %s: %w", path, err)
	}
	schema, err := fr.Schema()
	if err != nil {
		return fmt.Errorf("data: parquet %s: schema: %w", path, err)
	}
	col, err := b.findColumn(path, schema)
	if err != nil {
		return err
	}
	rr, err := fr.GetRecordReader(ctx, []int{col}, nil)
	if err != nil {
		return fmt.Errorf("data: parquet %s: %w", path, err)
	}
	defer rr.Release()
	return b.addRecords(ctx, path, rr, 0, sizeProgress(path, pf.NumRows()))
}

// AddArrow ingests the column cfg.Column of an Arrow IPC file (random-access
// format) or stream, one document per non-null row, a record batch at a
// time. A malformed file is an error naming it: its flatbuffers and
// framing are checked before arrow-go reads it (checkArrowFile,
// checkArrowStream), and a panic of arrow-go's readers is caught.
func (b *Builder) AddArrow(ctx context.Context, path string) (err error) {
	defer malformed("arrow", path, &err)
	f, err := regfile.Open(path)
	if err != nil {
		return fmt.Errorf("data: arrow: %w", err)
	}
	defer f.Close()
	var magic [6]byte
	n, _ := io.ReadFull(f, magic[:])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("data: arrow %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("data: arrow %s: %w", path, err)
	}
	// arrow-go does not verify the flatbuffers it reads (see
	// arrowcheck.go): check them, and cap what it may read at the file's
	// size.
	isFile := n == 6 && string(magic[:]) == "ARROW1"
	if isFile {
		err = checkArrowFile(f, st.Size())
	} else {
		err = checkArrowStream(f, 0, st.Size())
	}
	if err != nil {
		return fmt.Errorf("data: arrow %s: %w", path, err)
	}
	limit := max(st.Size(), 1) // 0 would disable the limits
	limits := []ipc.Option{ipc.WithMetadataSizeLimit(limit), ipc.WithBodySizeLimit(limit)}
	if isFile {
		fr, err := ipc.NewFileReader(f, limits...)
		if err != nil {
			return fmt.Errorf("data: arrow %s: %w", path, err)
		}
		defer fr.Close()
		col, err := b.findColumn(path, fr.Schema())
		if err != nil {
			return err
		}
		return b.addRecords(ctx, path, fr, col, perBatchProgress(path, fr.NumRecords()))
	}
	sr, err := ipc.NewReader(f, limits...)
	if err != nil {
		return fmt.Errorf("data: arrow %s: %w", path, err)
	}
	defer sr.Release()
	col, err := b.findColumn(path, sr.Schema())
	if err != nil {
		return err
	}
	return b.addRecords(ctx, path, sr, col, sizeProgress(path, -1))
}

// findColumn returns the index of cfg.Column and checks its type.
func (b *Builder) findColumn(path string, s *arrow.Schema) (int, error) {
	idx := s.FieldIndices(b.cfg.Column)
	if len(idx) == 0 {
		return 0, fmt.Errorf("data: %s: column %q: not found in schema %s", path, b.cfg.Column, s)
	}
	t := s.Field(idx[0]).Type
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return idx[0], nil
	case arrow.LIST, arrow.LARGE_LIST:
		if isInteger(t.(arrow.ListLikeType).Elem().ID()) {
			return idx[0], nil
		}
	}
	return 0, fmt.Errorf("data: %s: column %q: type: expected string, large_string or a list of integers, got %s", path, b.cfg.Column, t)
}

func isInteger(id arrow.Type) bool {
	switch id {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

// recordSource is what Parquet and both Arrow IPC readers share.
type recordSource interface {
	Read() (arrow.RecordBatch, error)
}

// progressFn turns rows done (of a batch) into a Progress call.
type progressFn func(b *Builder, rowsInBatch int64, done bool)

// sizeProgress spreads the file size over totalRows rows (all at the end if
// unknown).
func sizeProgress(path string, totalRows int64) progressFn {
	var size int64
	if st, err := os.Stat(path); err == nil {
		size = st.Size()
	}
	var rows, reported int64
	return func(b *Builder, n int64, done bool) {
		if b.cfg.Progress == nil {
			return
		}
		rows += n
		at := size
		if !done && totalRows > 0 {
			at = size * min(rows, totalRows) / totalRows
		} else if !done {
			return
		}
		b.cfg.Progress(at - reported)
		reported = at
	}
}

// perBatchProgress spreads the file size over its record batches.
func perBatchProgress(path string, batches int) progressFn {
	p := sizeProgress(path, int64(batches))
	return func(b *Builder, _ int64, done bool) {
		if done {
			p(b, 0, true)
		} else {
			p(b, 1, false)
		}
	}
}

// addRecords streams record batches from src and writes column col.
func (b *Builder) addRecords(ctx context.Context, path string, src recordSource, col int, progress progressFn) error {
	var texts []string
	var ids []int32
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := src.Read()
		if errors.Is(err, io.EOF) || (err == nil && rec == nil) {
			break
		}
		if err != nil {
			return fmt.Errorf("data: %s: reading record batch: %w", path, err)
		}
		arr := rec.Column(col)
		switch a := arr.(type) {
		case *array.String:
			texts = appendStrings(texts[:0], a)
		case *array.LargeString:
			texts = appendStrings(texts[:0], a)
		case array.ListLike:
			if err := b.addTokenLists(path, a, &ids); err != nil {
				return err
			}
			texts = texts[:0]
		default:
			return fmt.Errorf("data: %s: column %q: unexpected array type %s", path, b.cfg.Column, arr.DataType())
		}
		b.sum.Nulls += arr.NullN()
		if len(texts) > 0 {
			if err := b.AddTexts(texts); err != nil {
				return err
			}
		}
		progress(b, rec.NumRows(), false)
	}
	progress(b, 0, true)
	return nil
}

type stringArray interface {
	Len() int
	IsNull(int) bool
	Value(int) string
}

// appendStrings appends the non-null values; they point into the record
// batch and are used before the next Read.
func appendStrings(dst []string, a stringArray) []string {
	for i := 0; i < a.Len(); i++ {
		if !a.IsNull(i) {
			dst = append(dst, a.Value(i))
		}
	}
	return dst
}

// addTokenLists writes each non-null list of token ids as a document,
// checking every id against the vocabulary.
func (b *Builder) addTokenLists(path string, a array.ListLike, scratch *[]int32) error {
	values := a.ListValues()
	get, err := integerGetter(values)
	if err != nil {
		return fmt.Errorf("data: %s: column %q: %w", path, b.cfg.Column, err)
	}
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			continue
		}
		start, end := a.ValueOffsets(i)
		ids := (*scratch)[:0]
		for j := start; j < end; j++ {
			v := get(int(j))
			if v < 0 || v >= int64(b.tok.VocabSize()) || values.IsNull(int(j)) {
				// ValueStr gives the stored value (a uint64 above 2^62, which
				// v cannot hold, included) or "(null)".
				return fmt.Errorf("data: %s: column %q: row %d token %d: expected id in [0,%d), got %s", path, b.cfg.Column, i, j-start, b.tok.VocabSize(), values.ValueStr(int(j)))
			}
			ids = append(ids, int32(v))
		}
		*scratch = ids
		if err := b.AddTokens(ids, 0); err != nil {
			return err
		}
	}
	return nil
}

// integerGetter returns an accessor that widens any integer array to int64.
func integerGetter(a arrow.Array) (func(int) int64, error) {
	switch v := a.(type) {
	case *array.Int8:
		return func(i int) int64 { return int64(v.Value(i)) }, nil
	case *array.Int16:
		return func(i int) int64 { return int64(v.Value(i)) }, nil
	case *array.Int32:
		return func(i int) int64 { return int64(v.Value(i)) }, nil
	case *array.Int64:
		return func(i int) int64 { return v.Value(i) }, nil
	case *array.Uint8:
		return func(i int) int64 { return int64(v.Value(i)) }, nil
	case *array.Uint16:
		return func(i int) int64 { return int64(v.Value(i)) }, nil
	case *array.Uint32:
		return func(i int) int64 { return int64(v.Value(i)) }, nil
	case *array.Uint64:
		return func(i int) int64 {
			if x := v.Value(i); x <= 1<<62 {
				return int64(x)
			}
			return -1
		}, nil
	}
	return nil, fmt.Errorf("list values: expected integers, got %s", a.DataType())
}
