package hf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hilbert-ml/hilbert/safetensors"
)

// source is the tensors of a model directory: model.safetensors, or the
// shards model.safetensors.index.json lists, by canonical name (without
// the "transformer." or "model." prefix).
type source struct {
	dir    string
	files  []*safetensors.File
	byName map[string]entry
}

// entry is where one tensor is stored.
type entry struct {
	file *safetensors.File
	name string // as stored
	info safetensors.Info
}

// canonical strips the base-model prefix Hugging Face puts on the names
// of a *LMHeadModel / *ForCausalLM checkpoint.
func canonical(name string) string {
	for _, p := range []string{"transformer.", "model."} {
		if strings.HasPrefix(name, p) {
			return name[len(p):]
		}
	}
	return name
}

// openSource opens the directory's safetensors file or shards. A shard
// index naming a tensor its file lacks, a file holding a tensor the index
// does not list, and two stored names of one canonical name are errors.
func openSource(dir string) (*source, error) {
	s := &source{dir: dir, byName: map[string]entry{}}
	index := filepath.Join(dir, "model.safetensors.index.json")
	var weightMap map[string]string
	files := []string{"model.safetensors"}
	if b, err := os.ReadFile(index); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, fmt.Errorf("hf: %s: %w", index, err)
		}
		if len(idx.WeightMap) == 0 {
			return nil, fmt.Errorf("hf: %s: no \"weight_map\"", index)
		}
		weightMap = idx.WeightMap
		files = files[:0]
		for _, fn := range weightMap {
			if fn != filepath.Base(fn) {
				return nil, fmt.Errorf("hf: %s: shard %q is not a file in the directory", index, fn)
			}
			files = append(files, fn)
		}
		slices.Sort(files)
		files = slices.Compact(files) // each shard once, in name order
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("hf: %w", err)
	} else if _, err := os.Stat(filepath.Join(dir, files[0])); os.IsNotExist(err) {
		return nil, fmt.Errorf("hf: %s holds neither model.safetensors nor model.safetensors.index.json", dir)
	}
	for _, fn := range files {
		f, err := safetensors.Open(filepath.Join(dir, fn))
		if err != nil {
			s.close()
			return nil, fmt.Errorf("hf: %w", err)
		}
		s.files = append(s.files, f)
		for _, in := range f.Tensors() {
			if weightMap != nil && weightMap[in.Name] != fn {
				s.close()
				return nil, fmt.Errorf("hf: %s: tensor %q is not listed for this shard in %s", f.Path(), in.Name, index)
			}
			c := canonical(in.Name)
			if prev, dup := s.byName[c]; dup {
				s.close()
				return nil, fmt.Errorf("hf: tensor %q in %s and %q in %s are the same tensor", prev.name, prev.file.Path(), in.Name, f.Path())
			}
			s.byName[c] = entry{file: f, name: in.Name, info: in}
		}
	}
	for name, fn := range weightMap {
		if _, ok := s.byName[canonical(name)]; !ok {
			s.close()
			return nil, fmt.Errorf("hf: %s lists tensor %q in %s, which does not hold it", index, name, fn)
		}
	}
	return s, nil
}

func (s *source) close() {
	for _, f := range s.files {
		f.Close()
	}
}

// describe names the directory's files for an error message.
func (s *source) describe() string {
	names := make([]string, len(s.files))
	for i, f := range s.files {
		names[i] = filepath.Base(f.Path())
	}
	return fmt.Sprintf("%s (%s)", s.dir, strings.Join(names, ", "))
}
