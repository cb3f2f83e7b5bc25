package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/internal/atomicfile"
)

// ManifestName is the file, in a folder of shards, that lists them. A
// Builder writes it last, after every shard is in place, so a build that
// did not finish leaves none; WriteShard adds the shard it wrote;
// WriteManifest makes one for shards from elsewhere (llm.c's downloads).
// NewLoader refuses a training set without one, or one that does not
// match it (see VerifyManifest).
const ManifestName = "manifest.json"

// manifestFormat names the manifest's format (its "format" field).
const manifestFormat = "hilbert-shards"

// Manifest is the content of a folder's manifest.json.
type Manifest struct {
	Format  string `json:"format"`  // "hilbert-shards"
	Version int    `json:"version"` // 1
	// Checksum names the hash of ManifestShard.Checksum: "crc32c", the
	// CRC-32C (Castagnoli) of a shard's token bytes, the 2*Tokens bytes
	// after its 1024-byte header.
	Checksum string          `json:"checksum"`
	Shards   []ManifestShard `json:"shards"`
}

// ManifestShard is one shard of a Manifest.
type ManifestShard struct {
	File     string `json:"file"`     // base name, in the manifest's folder
	Split    string `json:"split"`    // "train" or "val"
	Tokens   int64  `json:"tokens"`   // token count (the header's)
	Checksum string `json:"checksum"` // 8 hex digits
}

// splitOf returns the split a shard's name implies: "val" when a word of
// its name (split at _ - . and spaces) is "val", as in llm.c's
// fineweb_val_000000.bin, else "train".
func splitOf(name string) string {
	words := strings.FieldsFunc(name, func(r rune) bool { return r == '_' || r == '-' || r == '.' || r == ' ' })
	if slices.Contains(words, "val") {
		return "val"
	}
	return "train"
}

func checksumString(sum uint32) string { return fmt.Sprintf("%08x", sum) }

// ReadManifest reads dir's manifest.json. A missing one is an error that
// wraps os.ErrNotExist.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestName)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("data: manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("data: manifest %s: %w", path, err)
	}
	switch {
	case m.Format != manifestFormat:
		return nil, fmt.Errorf("data: manifest %s: format: expected %q, got %q", path, manifestFormat, m.Format)
	case m.Version != 1:
		return nil, fmt.Errorf("data: manifest %s: version: expected 1, got %d", path, m.Version)
	case m.Checksum != "crc32c":
		return nil, fmt.Errorf("data: manifest %s: checksum: expected \"crc32c\", got %q", path, m.Checksum)
	}
	seen := map[string]bool{}
	for i, s := range m.Shards {
		if s.File == "" || s.File != filepath.Base(s.File) || seen[s.File] {
			return nil, fmt.Errorf("data: manifest %s: shard %d: file %q: expected a unique base name", path, i, s.File)
		}
		seen[s.File] = true
		if _, err := strconv.ParseUint(s.Checksum, 16, 32); err != nil || len(s.Checksum) != 8 {
			return nil, fmt.Errorf("data: manifest %s: shard %s: checksum %q: expected 8 hex digits", path, s.File, s.Checksum)
		}
	}
	return &m, nil
}

// entry returns the shard named file, or nil.
func (m *Manifest) entry(file string) *ManifestShard {
	for i := range m.Shards {
		if m.Shards[i].File == file {
			return &m.Shards[i]
		}
	}
	return nil
}

// put adds or replaces e.
func (m *Manifest) put(e ManifestShard) {
	if old := m.entry(e.File); old != nil {
		*old = e
		return
	}
	m.Shards = append(m.Shards, e)
}

// writeManifest writes m as dir's manifest.json atomically
// (internal/atomicfile), shards sorted by name; with
// no shards it removes the file.
func writeManifest(dir string, m *Manifest) error {
	path := filepath.Join(dir, ManifestName)
	if len(m.Shards) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("data: manifest: %w", err)
		}
		return nil
	}
	m.Format, m.Version, m.Checksum = manifestFormat, 1, "crc32c"
	slices.SortFunc(m.Shards, func(a, b ManifestShard) int { return strings.Compare(a.File, b.File) })
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("data: manifest %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n')); err != nil {
		return fmt.Errorf("data: manifest: %w", err)
	}
	return nil
}

// updateManifest applies edit to dir's manifest (an empty one when there
// is none) and writes it back. It is not safe for concurrent writers in
// the same folder.
func updateManifest(dir string, edit func(*Manifest)) error {
	m, err := ReadManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		m, err = &Manifest{}, nil
	}
	if err != nil {
		return err
	}
	edit(m)
	return writeManifest(dir, m)
}

// WriteManifest writes dir's manifest.json for the .bin shards it holds,
// for shards made elsewhere (llm.c's downloaded FineWeb shards have none).
// It reads every shard in full (checking its header and size) to compute
// its checksum, and replaces any manifest already there. A shard whose
// name has the word "val" is recorded as validation, the others as
// training. It returns the manifest written.
func WriteManifest(dir string) (*Manifest, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.bin"))
	if err != nil {
		return nil, fmt.Errorf("data: manifest: %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("data: manifest: %s holds no .bin shards", dir)
	}
	m := &Manifest{}
	for _, p := range paths {
		s, err := OpenShard(p, 0)
		if err != nil {
			return nil, err
		}
		m.put(ManifestShard{File: filepath.Base(p), Split: splitOf(filepath.Base(p)), Tokens: int64(s.Len()), Checksum: checksumString(s.Checksum())})
		s.Close()
	}
	if err := writeManifest(dir, m); err != nil {
		return nil, err
	}
	return m, nil
}

// VerifyManifest checks a training set as NewLoader does: it opens each
// shard (reading it in full) and checks it against its folder's manifest
// (see verifyTraining).
func VerifyManifest(paths []string) error {
	shards := make([]*Shard, 0, len(paths))
	defer func() {
		for _, s := range shards {
			s.Close()
		}
	}()
	for _, p := range paths {
		s, err := OpenShard(p, 0)
		if err != nil {
			return err
		}
		shards = append(shards, s)
	}
	return verifyTraining(shards)
}

// manifestFor reads the manifest of s's folder with an error that says
// what to do when there is none.
func manifestFor(s *Shard) (*Manifest, error) {
	dir := filepath.Dir(s.path)
	m, err := ReadManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("data: shard %s: its folder has no %s, so it may be a partial set (a prepare that did not finish writes none); if the shards are complete (llm.c's downloads), write one with `hilbert prepare -manifest %s`", s.path, ManifestName, dir)
	}
	return m, err
}

// checkEntry compares an open shard with its manifest entry.
func checkEntry(s *Shard, m *Manifest) error {
	dir := filepath.Dir(s.path)
	e := m.entry(filepath.Base(s.path))
	if e == nil {
		return fmt.Errorf("data: shard %s is not listed in %s (%d shards listed)", s.path, filepath.Join(dir, ManifestName), len(m.Shards))
	}
	if e.Tokens != int64(s.Len()) {
		return fmt.Errorf("data: shard %s does not match %s: tokens: expected %d, got %d", s.path, filepath.Join(dir, ManifestName), e.Tokens, s.Len())
	}
	if got := checksumString(s.Checksum()); got != e.Checksum {
		return fmt.Errorf("data: shard %s does not match %s: crc32c: expected %s, got %s (the file changed after the manifest was written)", s.path, filepath.Join(dir, ManifestName), e.Checksum, got)
	}
	return nil
}

// verifyListed checks one open shard (a validation shard) against its
// folder's manifest: listed, with the same token count and checksum.
func verifyListed(s *Shard) error {
	m, err := manifestFor(s)
	if err != nil {
		return err
	}
	return checkEntry(s, m)
}

// verifyTraining checks a training set against the manifests of its
// folders: every shard is listed as training with its token count and
// checksum, and every training shard each manifest lists is in the set
// (so a partial or damaged set, or a validation shard among the training
// ones, is refused).
func verifyTraining(shards []*Shard) error {
	byDir := map[string][]*Shard{}
	var dirs []string
	for _, s := range shards {
		d := filepath.Dir(s.path)
		if byDir[d] == nil {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], s)
	}
	for _, d := range dirs {
		m, err := manifestFor(byDir[d][0])
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, s := range byDir[d] {
			if err := checkEntry(s, m); err != nil {
				return err
			}
			if e := m.entry(filepath.Base(s.path)); e.Split != "train" {
				return fmt.Errorf("data: shard %s is listed as %q in %s, not as a training shard", s.path, e.Split, filepath.Join(d, ManifestName))
			}
			have[filepath.Base(s.path)] = true
		}
		var missing []string
		train := 0
		for _, e := range m.Shards {
			if e.Split == "train" {
				train++
				if !have[e.File] {
					missing = append(missing, e.File)
				}
			}
		}
		if len(missing) > 0 {
			show := missing[:min(len(missing), 5)]
			more := ""
			if len(missing) > len(show) {
				more = fmt.Sprintf(" and %d more", len(missing)-len(show))
			}
			return fmt.Errorf("data: training set: %s lists %d training shards, the set has %d of them: missing %s%s (pass them all; to train on a subset, put it in a folder of its own and run `hilbert prepare -manifest DIR` there)",
				filepath.Join(d, ManifestName), train, train-len(missing), strings.Join(show, ", "), more)
		}
	}
	return nil
}
