package fineweb

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"unsafe"
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

// Shard is one memory-mapped shard file. Its tokens are read-only and valid
// until Close.
type Shard struct {
	path   string
	data   []byte // whole file, mapped
	tokens []uint16
	unmap  func() error
}

// OpenShard maps the shard at path and checks its header, its size and that
// every token is below vocab (vocab <= 0 skips that check). Errors name the
// file and the field.
func OpenShard(path string, vocab int) (*Shard, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fineweb: shard: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fineweb: shard %s: %w", path, err)
	}
	size := st.Size()
	if size < HeaderBytes {
		return nil, fmt.Errorf("fineweb: shard %s: size: expected at least %d bytes for the header, got %d", path, HeaderBytes, size)
	}
	var hdr [3 * 4]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("fineweb: shard %s: header: %w", path, err)
	}
	count, err := checkHeader(hdr[:], size)
	if err != nil {
		return nil, fmt.Errorf("fineweb: shard %s: %w", path, err)
	}
	data, unmap, err := mapFile(f, int(size))
	if err != nil {
		return nil, fmt.Errorf("fineweb: shard %s: map: %w", path, err)
	}
	s := &Shard{path: path, data: data, unmap: unmap}
	s.tokens = uint16View(data[HeaderBytes:], count)
	if vocab > 0 {
		for i, t := range s.tokens {
			if int(t) >= vocab {
				s.Close()
				return nil, fmt.Errorf("fineweb: shard %s: token %d: expected id below vocab size %d, got %d", path, i, vocab, t)
			}
		}
	}
	return s, nil
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

// uint16View returns the n little-endian uint16 in b without copying on
// little-endian machines.
func uint16View(b []byte, n int) []uint16 {
	if n == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Path returns the file the shard was opened from.
func (s *Shard) Path() string { return s.path }

// Len returns the number of tokens in the shard.
func (s *Shard) Len() int { return len(s.tokens) }

// Tokens returns the shard's tokens; the slice is read-only and valid until
// Close.
func (s *Shard) Tokens() []uint16 { return s.tokens }

// Close unmaps the shard.
func (s *Shard) Close() error {
	if s.unmap == nil {
		return nil
	}
	err := s.unmap()
	s.unmap, s.data, s.tokens = nil, nil, nil
	return err
}

// ShardWriter writes one shard. Tokens go to a temporary file in the same
// directory; Close writes the header, syncs and renames it into place, so a
// crash never leaves a half-written shard under the final name.
type ShardWriter struct {
	path  string
	f     *os.File
	w     *bufio.Writer
	count int64
	buf   [8192]byte
	err   error
}

// CreateShard starts a shard that will appear at path on Close. It fails if
// path exists and overwrite is false.
func CreateShard(path string, overwrite bool) (*ShardWriter, error) {
	if !overwrite {
		if _, err := os.Lstat(path); err == nil {
			return nil, fmt.Errorf("fineweb: shard %s: %w", path, os.ErrExist)
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("fineweb: shard %s: %w", path, err)
	}
	w := &ShardWriter{path: path, f: f, w: bufio.NewWriterSize(f, 1<<20)}
	var hdr [HeaderBytes]byte
	if _, err := w.w.Write(hdr[:]); err != nil {
		w.Abort()
		return nil, fmt.Errorf("fineweb: shard %s: %w", path, err)
	}
	return w, nil
}

// Path returns the final path of the shard.
func (w *ShardWriter) Path() string { return w.path }

// Len returns the number of tokens written so far.
func (w *ShardWriter) Len() int64 { return w.count }

// Write appends tokens, each of which must fit in uint16.
func (w *ShardWriter) Write(tokens []int32) error {
	if w.err != nil {
		return w.err
	}
	if w.count+int64(len(tokens)) > MaxShardTokens {
		w.err = fmt.Errorf("fineweb: shard %s: token count: exceeds %d", w.path, MaxShardTokens)
		return w.err
	}
	for len(tokens) > 0 {
		n := min(len(tokens), len(w.buf)/2)
		for i, t := range tokens[:n] {
			if t < 0 || t > math.MaxUint16 {
				w.err = fmt.Errorf("fineweb: shard %s: token %d: expected 0..65535, got %d", w.path, w.count+int64(i), t)
				return w.err
			}
			binary.LittleEndian.PutUint16(w.buf[2*i:], uint16(t))
		}
		if _, err := w.w.Write(w.buf[:2*n]); err != nil {
			w.err = fmt.Errorf("fineweb: shard %s: %w", w.path, err)
			return w.err
		}
		w.count += int64(n)
		tokens = tokens[n:]
	}
	return nil
}

// Close finishes the shard: header, fsync, rename into place, fsync of the
// directory. After an error the temporary file is removed.
func (w *ShardWriter) Close() error {
	if w.f == nil {
		return w.err
	}
	err := w.err
	if err == nil {
		err = w.w.Flush()
	}
	if err == nil {
		var hdr [12]byte
		binary.LittleEndian.PutUint32(hdr[0:], Magic)
		binary.LittleEndian.PutUint32(hdr[4:], Version)
		binary.LittleEndian.PutUint32(hdr[8:], uint32(w.count))
		_, err = w.f.WriteAt(hdr[:], 0)
	}
	if err == nil {
		err = w.f.Chmod(0o644)
	}
	if err == nil {
		err = w.f.Sync()
	}
	tmp := w.f.Name()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err == nil {
		err = os.Rename(tmp, w.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("fineweb: shard %s: %w", w.path, err)
	}
	if d, derr := os.Open(filepath.Dir(w.path)); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Abort discards the shard being written.
func (w *ShardWriter) Abort() {
	if w.f == nil {
		return
	}
	tmp := w.f.Name()
	w.f.Close()
	os.Remove(tmp)
	w.f = nil
	if w.err == nil {
		w.err = errors.New("fineweb: shard " + w.path + ": aborted")
	}
}

// WriteShard writes tokens as one shard at path (see CreateShard).
func WriteShard(path string, tokens []int32, overwrite bool) error {
	w, err := CreateShard(path, overwrite)
	if err != nil {
		return err
	}
	if err := w.Write(tokens); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}
