package train

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// Data fingerprints: a resumed run must train on the data its checkpoint
// trained on, wherever the files now lie. The fingerprint of a list of
// files is a SHA-256 over each file's length and contents, in order (the
// paths are not part of it). Files up to wholeHashLimit are hashed whole;
// a larger one (a FineWeb shard is 200 MB, and a run may list a thousand)
// by its length, its first sampleHead bytes and sampleWindows windows of
// sampleWindow bytes spread evenly over the rest, which tells two corpora
// or two tokenizations apart without reading them.
const (
	wholeHashLimit = 64 << 20
	sampleHead     = 64 << 10
	sampleWindows  = 16
	sampleWindow   = 4 << 10
)

// fingerprint returns "sha256:HEX (N files, B bytes)".
func fingerprint(paths []string) (string, error) {
	h := sha256.New()
	var total int64
	var lenBuf [8]byte
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("train: data fingerprint: %w", err)
		}
		err = hashFile(h, f, lenBuf[:])
		if info, e := f.Stat(); e == nil {
			total += info.Size()
		}
		f.Close()
		if err != nil {
			return "", fmt.Errorf("train: data fingerprint of %s: %w", p, err)
		}
	}
	files := "files"
	if len(paths) == 1 {
		files = "file"
	}
	return fmt.Sprintf("sha256:%s (%d %s, %d bytes)", hex.EncodeToString(h.Sum(nil))[:32], len(paths), files, total), nil
}

func hashFile(h io.Writer, f *os.File, lenBuf []byte) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	binary.LittleEndian.PutUint64(lenBuf, uint64(size))
	h.Write(lenBuf)
	if size <= wholeHashLimit {
		n, err := io.Copy(h, f)
		if err == nil && n != size {
			err = fmt.Errorf("read %d of %d bytes", n, size)
		}
		return err
	}
	buf := make([]byte, sampleHead)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return err
	}
	h.Write(buf)
	buf = buf[:sampleWindow]
	span := size - sampleHead - sampleWindow
	for i := range int64(sampleWindows) {
		off := sampleHead + span*i/(sampleWindows-1)
		if _, err := f.ReadAt(buf, off); err != nil {
			return err
		}
		h.Write(buf)
	}
	return nil
}
