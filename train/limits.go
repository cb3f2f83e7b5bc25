package train

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/models"
)

// Limits on sizes. A model, context or batch far past what the machine
// holds (layers 1000000000, vocab 2000000000) would end in "fatal error:
// out of memory" at the first allocation; checkLimits refuses it first,
// naming the setting and the memory it would need. The estimate is
// deliberately low (what training cannot do without), so that no run that
// fits is refused: it is compared with the host's whole memory.

// memoryPart is one term of a run's memory estimate.
type memoryPart struct {
	what  string  // what it holds, naming the settings it grows with
	bytes float64 // its size
}

// memoryEstimate returns the parts of the memory a run of c needs at least,
// in float64 (the sizes may overflow an int): the parameters with their
// gradients and two optimizer moments (float32 each), the activations one
// micro-batch keeps for the backward pass, the logits of the head's
// blocks, the RoPE tables and the batch's tokens.
func memoryEstimate(c Config) []memoryPart {
	m := c.Model
	if !c.IsPaper() {
		// Another family: its size fields, with the paper's proportions
		// (an MLP of 4 d, heads of d / heads) for what it does not say.
		z := c.Sizes()
		m = models.Config{Layers: z.Layers, Dim: z.Dim, MLPHidden: 4 * z.Dim, Vocab: z.Vocab, Context: z.Context, HeadDim: 64}
		if z.Heads > 0 {
			m.HeadDim = z.Dim / z.Heads
		}
	}
	f := func(v int) float64 { return float64(v) }
	layers, dim, mlp, vocab, ctx := f(m.Layers), f(m.Dim), f(m.MLPHidden), f(m.Vocab), f(m.Context)
	rows := f(c.MicroBatch) * f(c.SeqLen) // token positions of a micro-batch
	logits := rows * vocab
	if c.BlockRows > 0 {
		logits = math.Min(logits, f(c.BlockRows)*vocab)
	} else {
		logits = math.Min(logits, 64<<20) // the fused head's automatic blocks
	}
	state, word := 4.0*4, 4.0 // float32 weights, gradients and two moments
	if dt, _ := c.ModelDType(); dt == device.Float64 {
		state, word = 8*4, 8
	}
	return []memoryPart{
		{fmt.Sprintf("the blocks' weights and optimizer state, layers = %d x (4 dim^2 + 3 dim x mlp_hidden) with dim = %d, mlp_hidden = %d", m.Layers, m.Dim, m.MLPHidden),
			state * layers * (4*dim*dim + 3*dim*mlp)},
		{fmt.Sprintf("the embedding's and head's weights and optimizer state, 2 x vocab = %d x dim = %d", m.Vocab, m.Dim),
			state * 2 * vocab * dim},
		{fmt.Sprintf("the activations of a micro-batch, micro_batch = %d x seq_len = %d positions x layers = %d x (dim = %d, mlp_hidden = %d)", c.MicroBatch, c.SeqLen, m.Layers, m.Dim, m.MLPHidden),
			word * rows * (layers*(8*dim+3*mlp) + 2*dim)},
		{fmt.Sprintf("the head's logits and their gradient, micro_batch x seq_len (or block_rows) x vocab = %d", m.Vocab),
			word * 2 * logits},
		{fmt.Sprintf("the RoPE tables, context = %d x head_dim = %d", m.Context, m.HeadDim),
			word * 2 * ctx * f(m.HeadDim)},
		{fmt.Sprintf("the tokens of an update, batch_seqs = %d x seq_len = %d", c.BatchSeqs, c.SeqLen),
			4 * 2 * f(c.BatchSeqs) * (f(c.SeqLen) + 1)},
	}
}

// checkLimits refuses a config whose memory estimate exceeds the host's
// memory (hostMemory), before anything is allocated. The error gives the
// estimate, the memory there is, and the largest part with the settings it
// grows with.
func checkLimits(c Config) error {
	return checkLimitsWithin(c, hostMemory())
}

func checkLimitsWithin(c Config, limit float64) error {
	parts := memoryEstimate(c)
	total, big := 0.0, parts[0]
	for _, p := range parts {
		total += p.bytes
		if p.bytes > big.bytes {
			big = p
		}
	}
	if total <= limit {
		return nil
	}
	return fmt.Errorf("train: config: the run would need at least %s of memory, more than the %s this machine has; the largest part is %s (%s): lower it",
		formatBytes(total), formatBytes(limit), big.what, formatBytes(big.bytes))
}

// hostMemory is the memory the process may use: the smaller of the
// machine's (MemTotal of /proc/meminfo) and its cgroup's limit, where
// these can be read; elsewhere 2^50 bytes (1 PiB), which still refuses the
// sizes that cannot be meant.
func hostMemory() float64 {
	limit := float64(1 << 50)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				if kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64); err == nil && kb > 0 {
					limit = math.Min(limit, kb*1024)
				}
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && v > 0 {
			limit = math.Min(limit, v)
		}
	}
	return limit
}

// formatBytes writes n bytes in binary units (KiB to EiB), or as a power of
// ten past them.
func formatBytes(n float64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f bytes", n)
	}
	if n >= 1024 {
		return fmt.Sprintf("%.3g %s", n, units[i])
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
