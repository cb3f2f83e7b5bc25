package train

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hilbert-ml/hilbert/data"

	"github.com/hilbert-ml/hilbert/internal/regfile"
)

// Data fingerprints: a resumed run must train on the data its checkpoint
// trained on, wherever the files now lie. The fingerprint of a list of
// shards is a SHA-256 over each shard's token count and the CRC-32C of all
// its token bytes (data.ShardSum), in order (the paths are not part of
// it), written "crc32c:HEX (N shards, T tokens)". It covers every token
// the run trains on and costs nothing more: the loader reads each shard in
// full when it opens it, computing the CRC-32C that it checks against the
// folder's manifest, and the fingerprint is made from those sums.
//
// Checkpoints written before it hold the legacy fingerprint
// "sha256:HEX (N files, B bytes)", a SHA-256 over each file's length and
// contents, with files over legacyWholeLimit sampled (their length, the
// first legacyHead bytes and legacyWindows windows of legacyWindow bytes);
// such a checkpoint is compared by that rule (see fingerprintLike) and
// resumes as before, and its next checkpoint records the new fingerprint.
const (
	legacyWholeLimit = 64 << 20
	legacyHead       = 64 << 10
	legacyWindows    = 16
	legacyWindow     = 4 << 10
	legacyPrefix     = "sha256:"
)

// sumsFingerprint returns the fingerprint of shards with these sums.
func sumsFingerprint(sums []data.ShardSum) string {
	h := sha256.New()
	var buf [12]byte
	var tokens int64
	for _, s := range sums {
		binary.LittleEndian.PutUint64(buf[:8], uint64(s.Tokens))
		binary.LittleEndian.PutUint32(buf[8:], s.Checksum)
		h.Write(buf[:])
		tokens += int64(s.Tokens)
	}
	shards := "shards"
	if len(sums) == 1 {
		shards = "shard"
	}
	return fmt.Sprintf("crc32c:%s (%d %s, %d tokens)", hex.EncodeToString(h.Sum(nil))[:32], len(sums), shards, tokens)
}

// fingerprint opens the shards at paths (reading each in full) and returns
// their fingerprint.
func fingerprint(paths []string) (string, error) {
	sums := make([]data.ShardSum, 0, len(paths))
	for _, p := range paths {
		s, err := data.OpenShard(p, 0)
		if err != nil {
			return "", fmt.Errorf("train: data fingerprint: %w", err)
		}
		sums = append(sums, s.Sum())
		s.Close()
	}
	return sumsFingerprint(sums), nil
}

// fingerprintLike returns the fingerprint of paths by the rule that made
// want: the legacy one for a "sha256:" fingerprint, else the current one.
func fingerprintLike(want string, paths []string) (string, error) {
	if strings.HasPrefix(want, legacyPrefix) {
		return legacyFingerprint(paths)
	}
	return fingerprint(paths)
}

// legacyFingerprint returns the fingerprint older checkpoints recorded:
// "sha256:HEX (N files, B bytes)".
func legacyFingerprint(paths []string) (string, error) {
	h := sha256.New()
	var total int64
	var lenBuf [8]byte
	for _, p := range paths {
		f, err := regfile.Open(p)
		if err != nil {
			return "", fmt.Errorf("train: data fingerprint: %w", err)
		}
		err = legacyHashFile(h, f, lenBuf[:])
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
	return fmt.Sprintf("%s%s (%d %s, %d bytes)", legacyPrefix, hex.EncodeToString(h.Sum(nil))[:32], len(paths), files, total), nil
}

func legacyHashFile(h io.Writer, f *os.File, lenBuf []byte) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	binary.LittleEndian.PutUint64(lenBuf, uint64(size))
	h.Write(lenBuf)
	if size <= legacyWholeLimit {
		n, err := io.Copy(h, f)
		if err == nil && n != size {
			err = fmt.Errorf("read %d of %d bytes", n, size)
		}
		return err
	}
	buf := make([]byte, legacyHead)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return err
	}
	h.Write(buf)
	buf = buf[:legacyWindow]
	span := size - legacyHead - legacyWindow
	for i := range int64(legacyWindows) {
		off := legacyHead + span*i/(legacyWindows-1)
		if _, err := f.ReadAt(buf, off); err != nil {
			return err
		}
		h.Write(buf)
	}
	return nil
}
