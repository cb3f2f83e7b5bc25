package data

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
	"github.com/hilbert-ml/hilbert/internal/regfile"
)

// The llm.c shard format: a header of HeaderInts little-endian int32 (Magic,
// Version, token count, the rest 0), then count little-endian uint16 tokens.
// The file size is exactly HeaderBytes + 2*count.
const (
	Magic       = 20240520
	Version     = 1
	HeaderInts  = 256
	HeaderBytes = HeaderInts * 4
	// MaxShardTokens is the most tokens one shard can declare (int32 count).
	MaxShardTokens = math.MaxInt32
)

// Shard is one open shard file. Its tokens are read on demand with pread
// (ReadTokens), not memory-mapped: a file truncated while it is open gives
// an error naming it, where a mapping would kill the process with SIGBUS.
// A Shard is safe for concurrent reads.
type Shard struct {
	path  string
	r     io.ReaderAt // the file; nil once closed
	close func() error
	count int
	sum   uint32 // crc32c of the token bytes

	// For Verify: the file's stat, and its size and modification time
	// when its tokens were last checked (stat is nil for a shard on memory).
	stat    func() (os.FileInfo, error)
	size    int64
	modTime time.Time
}

// castagnoli is the CRC-32C table (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// scanChunk is how many bytes OpenShard reads at a time to check tokens.
const scanChunk = 1 << 20

// OpenShard opens the shard at path and checks its header, its size and
// that every token is below vocab (vocab <= 0 skips that check); in the
// same pass over the file it computes the CRC-32C of the token bytes
// (Checksum). Errors name the file and the field.
func OpenShard(path string, vocab int) (*Shard, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: shard: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data: shard %s: %w", path, err)
	}
	s, err := readShard(path, f, st.Size(), vocab)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.close, s.stat = f.Close, f.Stat
	s.size, s.modTime = st.Size(), st.ModTime()
	return s, nil
}

// readShard checks the shard of the given size that r reads (OpenShard's
// checks, on any io.ReaderAt: the fuzz test runs them on memory).
func readShard(path string, r io.ReaderAt, size int64, vocab int) (*Shard, error) {
	if size < HeaderBytes {
		return nil, fmt.Errorf("data: shard %s: size: expected at least %d bytes for the header, got %d", path, HeaderBytes, size)
	}
	var hdr [3 * 4]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("data: shard %s: header: %w", path, err)
	}
	count, err := checkHeader(hdr[:], size)
	if err != nil {
		return nil, fmt.Errorf("data: shard %s: %w", path, err)
	}
	s := &Shard{path: path, r: r, close: func() error { return nil }, count: count}
	if s.sum, err = s.scan(vocab); err != nil {
		return nil, err
	}
	return s, nil
}

// scan reads every token of the shard, checking that each is below vocab
// (vocab <= 0 skips that check), and returns the CRC-32C of their bytes.
func (s *Shard) scan(vocab int) (uint32, error) {
	var sum uint32
	raw := make([]byte, min(2*s.count, scanChunk))
	var decoded []uint16
	if !littleEndian {
		decoded = make([]uint16, len(raw)/2)
	}
	for off := 0; off < s.count; off += len(raw) / 2 {
		chunk := raw[:2*min(len(raw)/2, s.count-off)]
		if err := s.readRaw(chunk, off); err != nil {
			return 0, err
		}
		sum = crc32.Update(sum, castagnoli, chunk)
		if vocab <= 0 {
			continue
		}
		var toks []uint16
		if littleEndian {
			toks = unsafe.Slice((*uint16)(unsafe.Pointer(&chunk[0])), len(chunk)/2)
		} else {
			toks = decoded[:len(chunk)/2]
			for i := range toks {
				toks[i] = binary.LittleEndian.Uint16(chunk[2*i:])
			}
		}
		if i := firstAtOrAbove(toks, vocab); i >= 0 {
			return 0, fmt.Errorf("data: shard %s: token %d: expected id below vocab size %d, got %d", s.path, off+i, vocab, toks[i])
		}
	}
	return sum, nil
}

// Verify checks that the shard's file still holds the tokens OpenShard
// read: a file written over in place while it is open (same size, other
// tokens) would otherwise be trained on unnoticed. Where the file's size
// or modification time differ from when it was last checked, its tokens
// are read again and their CRC-32C compared with the one OpenShard
// computed (so the cost is one stat unless the file was touched). A
// change is an error naming the file.
func (s *Shard) Verify() error {
	if s.stat == nil || s.r == nil {
		return nil // on memory, or closed
	}
	st, err := s.stat()
	if err != nil {
		return fmt.Errorf("data: shard %s: %w", s.path, err)
	}
	if st.Size() == s.size && st.ModTime().Equal(s.modTime) {
		return nil
	}
	if want := HeaderBytes + 2*int64(s.count); st.Size() != want {
		return fmt.Errorf("data: shard %s changed while in use: %d bytes, it held %d when opened; restore it (or start over on the new data)", s.path, st.Size(), want)
	}
	sum, err := s.scan(0)
	if err != nil {
		return err
	}
	if sum != s.sum {
		return fmt.Errorf("data: shard %s changed while in use: its tokens' CRC-32C is now %08x, %08x when it was opened (written over in place?); restore it (or start over on the new data)", s.path, sum, s.sum)
	}
	s.size, s.modTime = st.Size(), st.ModTime() // touched, not changed
	return nil
}

// firstAtOrAbove returns the index of the first token >= vocab, or -1.
func firstAtOrAbove(toks []uint16, vocab int) int {
	if vocab > math.MaxUint16 {
		return -1
	}
	v := uint16(vocab)
	for i, t := range toks {
		if t >= v {
			return i
		}
	}
	return -1
}

// checkHeader validates the first three header ints against the file size and
// returns the token count.
func checkHeader(hdr []byte, size int64) (int, error) {
	magic := int32(binary.LittleEndian.Uint32(hdr[0:]))
	version := int32(binary.LittleEndian.Uint32(hdr[4:]))
	count := int32(binary.LittleEndian.Uint32(hdr[8:]))
	if magic != Magic {
		return 0, fmt.Errorf("header magic: expected %d, got %d", Magic, magic)
	}
	if version != Version {
		return 0, fmt.Errorf("header version: expected %d, got %d", Version, version)
	}
	if count < 0 {
		return 0, fmt.Errorf("header token count: expected >= 0, got %d", count)
	}
	if want := HeaderBytes + 2*int64(count); size != want {
		return 0, fmt.Errorf("size: expected %d bytes for %d tokens, got %d", want, count, size)
	}
	return int(count), nil
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Path returns the file the shard was opened from.
func (s *Shard) Path() string { return s.path }

// Len returns the number of tokens in the shard.
func (s *Shard) Len() int { return s.count }

// ShardSum is what a shard's data come to: its token count and the
// CRC-32C of its token bytes (Shard.Checksum), as a manifest records them.
// The shard's file is its 1024-byte header, which holds the count, and
// the token bytes, so two shards with equal sums hold the same tokens but
// for a CRC-32C collision (a chance of 2^-32 for a random change; the
// CRC catches every change of up to 3 bits, and every burst of up to 32).
type ShardSum struct {
	Tokens   int
	Checksum uint32
}

// Sum returns the shard's ShardSum.
func (s *Shard) Sum() ShardSum { return ShardSum{Tokens: s.count, Checksum: s.sum} }

// Checksum returns the CRC-32C (Castagnoli) of the shard's token bytes,
// the 2*Len bytes after the header, as OpenShard read them.
func (s *Shard) Checksum() uint32 { return s.sum }

// ReadTokens fills dst with the tokens at off, off+1, ... with one pread. A
// range past Len, or a file that has shrunk since OpenShard, is an error
// naming the file.
func (s *Shard) ReadTokens(dst []uint16, off int) error {
	if len(dst) == 0 {
		return nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 2*len(dst))
	if err := s.readRaw(b, off); err != nil {
		return err
	}
	if !littleEndian {
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint16(b[2*i:]) // reads dst[i]'s own two bytes first
		}
	}
	return nil
}

// readRaw reads the little-endian bytes of len(b)/2 tokens from token off.
func (s *Shard) readRaw(b []byte, off int) error {
	n := len(b) / 2
	if off < 0 || off+n > s.count {
		return fmt.Errorf("data: shard %s: tokens [%d, %d) outside the shard's %d", s.path, off, off+n, s.count)
	}
	if s.r == nil {
		return fmt.Errorf("data: shard %s: %w", s.path, os.ErrClosed)
	}
	at := HeaderBytes + 2*int64(off)
	got, err := s.r.ReadAt(b, at)
	if got < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			return fmt.Errorf("data: shard %s: truncated while in use: read %d of %d bytes at offset %d (it held %d tokens when opened)",
				s.path, got, len(b), at, s.count)
		}
		return fmt.Errorf("data: shard %s: %w", s.path, err)
	}
	return nil
}

// Tokens reads all of the shard's tokens into memory (2*Len bytes).
func (s *Shard) Tokens() ([]uint16, error) {
	out := make([]uint16, s.count)
	if err := s.ReadTokens(out, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// Close closes the file.
func (s *Shard) Close() error {
	if s.r == nil {
		return nil
	}
	s.r = nil
	return s.close()
}

// ShardWriter writes one shard. Tokens go to a temporary file in the same
// directory; Close writes the header and commits it (internal/atomicfile),
// so a crash never leaves a half-written shard under the final name.
type ShardWriter struct {
	path  string
	f     *atomicfile.File // nil after Close or Abort
	w     *bufio.Writer
	count int64
	sum   uint32 // crc32c of the token bytes written
	buf   [8192]byte
	err   error
}

// CreateShard starts a shard that will appear at path on Close. It fails if
// path exists and overwrite is false.
func CreateShard(path string, overwrite bool) (*ShardWriter, error) {
	if !overwrite {
		if _, err := os.Lstat(path); err == nil {
			return nil, fmt.Errorf("data: shard %s: %w", path, os.ErrExist)
		}
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("data: shard %s: %w", path, err)
	}
	w := &ShardWriter{path: path, f: f, w: bufio.NewWriterSize(f, 1<<20)}
	var hdr [HeaderBytes]byte
	if _, err := w.w.Write(hdr[:]); err != nil {
		w.Abort()
		return nil, fmt.Errorf("data: shard %s: %w", path, err)
	}
	return w, nil
}

// Path returns the final path of the shard.
func (w *ShardWriter) Path() string { return w.path }

// Len returns the number of tokens written so far.
func (w *ShardWriter) Len() int64 { return w.count }

// Checksum returns the CRC-32C of the token bytes written so far (see
// Shard.Checksum).
func (w *ShardWriter) Checksum() uint32 { return w.sum }

// Write appends tokens, each of which must fit in uint16.
func (w *ShardWriter) Write(tokens []int32) error {
	if w.err != nil {
		return w.err
	}
	if w.count+int64(len(tokens)) > MaxShardTokens {
		w.err = fmt.Errorf("data: shard %s: token count: exceeds %d", w.path, MaxShardTokens)
		return w.err
	}
	for len(tokens) > 0 {
		n := min(len(tokens), len(w.buf)/2)
		for i, t := range tokens[:n] {
			if t < 0 || t > math.MaxUint16 {
				w.err = fmt.Errorf("data: shard %s: token %d: expected 0..65535, got %d", w.path, w.count+int64(i), t)
				return w.err
			}
			binary.LittleEndian.PutUint16(w.buf[2*i:], uint16(t))
		}
		w.sum = crc32.Update(w.sum, castagnoli, w.buf[:2*n])
		if _, err := w.w.Write(w.buf[:2*n]); err != nil {
			w.err = fmt.Errorf("data: shard %s: %w", w.path, err)
			return w.err
		}
		w.count += int64(n)
		tokens = tokens[n:]
	}
	return nil
}

// Close finishes the shard: the header, then the commit (fsync, rename
// into place, fsync of the directory). After an error the temporary file
// is removed.
func (w *ShardWriter) Close() error {
	if w.f == nil {
		return w.err
	}
	f := w.f
	w.f = nil
	err := w.err
	if err == nil {
		err = w.w.Flush()
	}
	if err == nil {
		var hdr [12]byte
		binary.LittleEndian.PutUint32(hdr[0:], Magic)
		binary.LittleEndian.PutUint32(hdr[4:], Version)
		binary.LittleEndian.PutUint32(hdr[8:], uint32(w.count))
		_, err = f.WriteAt(hdr[:], 0)
	}
	if err != nil {
		f.Abort()
		return fmt.Errorf("data: shard %s: %w", w.path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("data: shard: %w", err)
	}
	return nil
}

// Abort discards the shard being written.
func (w *ShardWriter) Abort() {
	if w.f == nil {
		return
	}
	w.f.Abort()
	w.f = nil
	if w.err == nil {
		w.err = errors.New("data: shard " + w.path + ": aborted")
	}
}

// WriteShard writes tokens as one shard at path (see CreateShard) and then
// records it in its folder's manifest (ManifestName), adding to what the
// manifest lists, so shards written one by one form a set NewLoader
// accepts. The shard's split is taken from its name (see WriteManifest).
// It is not safe for concurrent use on the same folder.
func WriteShard(path string, tokens []int32, overwrite bool) error {
	w, err := CreateShard(path, overwrite)
	if err != nil {
		return err
	}
	if err := w.Write(tokens); err != nil {
		w.Abort()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	e := w.entry()
	e.Split = splitOf(e.File)
	return updateManifest(filepath.Dir(path), func(m *Manifest) { m.put(e) })
}

// entry returns the manifest entry of the shard written (Split unset).
func (w *ShardWriter) entry() ManifestShard {
	return ManifestShard{File: filepath.Base(w.path), Tokens: w.count, Checksum: checksumString(w.sum)}
}
