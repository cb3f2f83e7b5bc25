package train

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sort"

	"github.com/hilbert-ml/hilbert/models/hf"

	"github.com/hilbert-ml/hilbert/internal/regfile"
)

// A run initialised from a Hugging Face model directory (Config.InitHF):
// the directory's config.json gives the run's family and configuration
// (resolveInitHF, from WithDefaults), and New loads its weights into the
// built model (initFromHF), so that update 0 validates the pretrained
// model. Resume then replaces them with the checkpoint's. The run's
// settings record the directory's fingerprint as init_hf, so a resume
// with other initial weights is refused like any other changed setting.

// noInitHF is the init_hf setting of a run that starts from its seed.
const noInitHF = "none"

// gpt2LayerNormEps is the LayerNorm epsilon of models.GPT2 (nn.LayerNorm's
// default), which its config does not record.
const gpt2LayerNormEps = 1e-5

// resolveInitHF sets the family and configuration of a run with InitHF
// from the directory's config.json: Family (which must agree when set),
// Arch (unless given; a preset may not be), and UntieHead for a GPT-2
// whose stored head is its own.
func (c *Config) resolveInitHF() error {
	if c.Family != "" && c.Arch != nil {
		return nil // resolved (WithDefaults is idempotent); LoadWeights checks Arch
	}
	// dtype 0: the configuration as a preset's, whose zero dtype is
	// float32; the run builds the model in its own.
	h, err := hf.ReadConfig(c.InitHF, 0)
	if err != nil {
		return fmt.Errorf("train: config: init_hf: %w", err)
	}
	switch {
	case c.Family != "" && c.Family != h.Family:
		return fmt.Errorf("train: config: init_hf %s is a %s (model %q); model is %q", c.InitHF, h.Architecture, h.Family, c.Family)
	case c.Preset != "" && c.Arch == nil:
		return fmt.Errorf("train: config: init_hf %s gives the model's configuration (its config.json); preset %q is set too", c.InitHF, c.Preset)
	case c.Model.Layers != 0:
		return fmt.Errorf("train: config: init_hf %s gives the model's configuration; Model (the paper's) is set", c.InitHF)
	case h.Family == "gpt2" && h.LayerNormEps != gpt2LayerNormEps:
		return fmt.Errorf("train: config: init_hf %s: layer_norm_epsilon %g: a run's GPT-2 has LayerNorm eps %g, and its checkpoints record no other", h.Path, h.LayerNormEps, gpt2LayerNormEps)
	}
	c.Family = h.Family
	if c.Arch == nil {
		c.Arch = h.Model
	}
	if h.Family == "gpt2" && !h.Tied {
		c.UntieHead = true // GPT-2's tie is a build option; Llama's is in Arch
	}
	return nil
}

// initFromHF loads the weights of InitHF into the built model and
// records the directory's fingerprint for the run's settings.
func (t *Trainer) initFromHF() error {
	t.initHF = noInitHF
	dir := t.cfg.InitHF
	if dir == "" {
		return nil
	}
	id, err := hfFingerprint(dir)
	if err != nil {
		return fmt.Errorf("train: init_hf: %w", err)
	}
	if err := hf.LoadWeights(dir, t.model.model); err != nil {
		return fmt.Errorf("train: init_hf: %w", err)
	}
	t.initHF = id
	return nil
}

// hfFingerprint identifies a Hugging Face directory's model: a SHA-256
// over the name, length and CRC-32C of config.json and of every
// *.safetensors and *.safetensors.index.json file in it (not the folder's
// path, so that it may move), written "crc32c:HEX (N files, B bytes)".
func hfFingerprint(dir string) (string, error) {
	names := []string{"config.json"}
	for _, pat := range []string{"*.safetensors", "*.safetensors.index.json"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return "", err
		}
		for _, p := range m {
			names = append(names, filepath.Base(p))
		}
	}
	sort.Strings(names[1:])
	h := sha256.New()
	table := crc32.MakeTable(crc32.Castagnoli)
	var total int64
	for _, name := range names {
		f, err := regfile.Open(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		c := crc32.New(table)
		n, err := io.Copy(c, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
		var buf [12]byte
		binary.LittleEndian.PutUint64(buf[:8], uint64(n))
		binary.LittleEndian.PutUint32(buf[8:], c.Sum32())
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(buf[:])
		total += n
	}
	return fmt.Sprintf("crc32c:%s (%d files, %d bytes)", hex.EncodeToString(h.Sum(nil))[:32], len(names), total), nil
}

// InitHF returns the fingerprint of the Hugging Face directory the run
// started from (Config.InitHF), as its settings record it: "none" for a
// run that starts from its seed.
func (t *Trainer) InitHF() string { return t.initHF }
