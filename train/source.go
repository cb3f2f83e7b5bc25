package train

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/tensor"
)

// Tokens is a micro-batch of token sequences on the host: Batch rows of
// Seq tokens each, row-major, where Targets[i] is the token that follows
// Inputs[i]. A Source's Tokens are valid until its next call.
type Tokens struct {
	Inputs, Targets []int32
	Batch, Seq      int
}

// LanguageModel is a next-token model with a fused loss: models.GPT2 is
// one.
type LanguageModel interface {
	Parameters() []*tensor.Tensor
	Loss(g *autograd.Graph, inputs, targets *tensor.Tensor) *tensor.Tensor
}

// LM adapts a LanguageModel to a Model of Tokens: each micro-batch's
// tokens are copied into int32 device tensors of its shape.
func LM(dev device.Device, m LanguageModel) Model[Tokens] {
	return &lmAdapter{dev: dev, m: m}
}

type lmAdapter struct {
	dev             device.Device
	m               LanguageModel
	inputs, targets *tensor.Tensor
}

func (a *lmAdapter) Parameters() []*tensor.Tensor { return a.m.Parameters() }

func (a *lmAdapter) Loss(g *autograd.Graph, b Tokens) (*tensor.Tensor, error) {
	if err := a.upload(b); err != nil {
		return nil, err
	}
	return a.m.Loss(g, a.inputs, a.targets), nil
}

// upload copies b into the adapter's tensors, reallocating them when the
// shape changes.
func (a *lmAdapter) upload(b Tokens) error {
	if err := b.check(); err != nil {
		return err
	}
	if a.inputs == nil || a.inputs.Dim(0) != b.Batch || a.inputs.Dim(1) != b.Seq {
		var err error
		if a.inputs, err = tensor.NewOf(a.dev, device.Int32, b.Batch, b.Seq); err != nil {
			return err
		}
		if a.targets, err = tensor.NewOf(a.dev, device.Int32, b.Batch, b.Seq); err != nil {
			return err
		}
	}
	a.inputs.SetInt32(b.Inputs)
	a.targets.SetInt32(b.Targets)
	return nil
}

// check reports a micro-batch whose slices do not match its shape.
func (b Tokens) check() error {
	if b.Batch < 1 || b.Seq < 1 || len(b.Inputs) != b.Batch*b.Seq || len(b.Targets) != b.Batch*b.Seq {
		return fmt.Errorf("train: a micro-batch of %d x %d tokens has %d inputs and %d targets", b.Batch, b.Seq, len(b.Inputs), len(b.Targets))
	}
	return nil
}

// Windows is an in-memory Source of Tokens: the token stream is cut into
// windows of Seq+1 tokens, Seq apart (a window's targets are its inputs
// moved by one), visited in a random order drawn from the seed for every
// epoch, Batch windows per micro-batch. The cursor is the number of
// windows handed out, so a resumed Windows over the same tokens continues
// exactly.
type Windows struct {
	tokens     []int32
	batch, seq int
	seed       uint64
	n          int   // windows per epoch
	k          int64 // windows handed out
	epoch      int64 // epoch of order
	order      []int
	in, tgt    []int32
}

// NewWindows returns a Windows over tokens (which it keeps; do not change
// them while it is in use).
func NewWindows(tokens []int32, batch, seq int, seed uint64) (*Windows, error) {
	if batch < 1 || seq < 1 {
		return nil, fmt.Errorf("train: windows: batch %d, seq %d: want both >= 1", batch, seq)
	}
	n := (len(tokens) - 1) / seq
	if n < 1 {
		return nil, fmt.Errorf("train: windows: %d tokens hold no window of seq+1 = %d tokens", len(tokens), seq+1)
	}
	return &Windows{tokens: tokens, batch: batch, seq: seq, seed: seed, n: n, epoch: -1,
		in: make([]int32, batch*seq), tgt: make([]int32, batch*seq)}, nil
}

// WindowsPerEpoch returns the number of windows in one pass over the
// tokens.
func (w *Windows) WindowsPerEpoch() int { return w.n }

// Next returns the next micro-batch.
func (w *Windows) Next() (Tokens, error) {
	for r := range w.batch {
		e, i := w.k/int64(w.n), int(w.k%int64(w.n))
		if e != w.epoch {
			w.order = rand.New(rand.NewPCG(w.seed, uint64(e))).Perm(w.n)
			w.epoch = e
		}
		start := w.order[i] * w.seq
		copy(w.in[r*w.seq:(r+1)*w.seq], w.tokens[start:start+w.seq])
		copy(w.tgt[r*w.seq:(r+1)*w.seq], w.tokens[start+1:start+w.seq+1])
		w.k++
	}
	return Tokens{Inputs: w.in, Targets: w.tgt, Batch: w.batch, Seq: w.seq}, nil
}

// windowsCursor is a Windows position; Windows and Tokens make sure a
// cursor is not applied to other data.
type windowsCursor struct {
	Window  int64 `json:"window"`
	Windows int   `json:"windows_per_epoch"`
	Tokens  int   `json:"tokens"`
}

// Cursor returns the position of the next micro-batch.
func (w *Windows) Cursor() ([]byte, error) {
	return json.Marshal(windowsCursor{Window: w.k, Windows: w.n, Tokens: len(w.tokens)})
}

// Seek moves to a position Cursor returned for the same tokens.
func (w *Windows) Seek(cursor []byte) error {
	var c windowsCursor
	if err := json.Unmarshal(cursor, &c); err != nil {
		return fmt.Errorf("train: windows: cursor: %w", err)
	}
	if c.Tokens != len(w.tokens) || c.Windows != w.n || c.Window < 0 {
		return fmt.Errorf("train: windows: the cursor is of %d tokens in %d windows (window %d); this source has %d tokens in %d windows",
			c.Tokens, c.Windows, c.Window, len(w.tokens), w.n)
	}
	w.k = c.Window
	return nil
}

// LoaderSource adapts a data.Loader (micro-batches of micro x seq
// tokens from llm.c shards) to a Source of Tokens.
func LoaderSource(l *data.Loader, micro, seq int) Source[Tokens] {
	return &loaderSource{l: l, batch: micro, seq: seq, in: make([]int32, micro*seq), tgt: make([]int32, micro*seq)}
}

type loaderSource struct {
	l          *data.Loader
	batch, seq int
	in, tgt    []int32
}

func (s *loaderSource) Next() (Tokens, error) {
	if err := s.l.Next(s.in, s.tgt); err != nil {
		return Tokens{}, err
	}
	return Tokens{Inputs: s.in, Targets: s.tgt, Batch: s.batch, Seq: s.seq}, nil
}

func (s *loaderSource) Cursor() ([]byte, error) { return json.Marshal(s.l.Cursor()) }

func (s *loaderSource) Seek(cursor []byte) error {
	var c data.Cursor
	if err := json.Unmarshal(cursor, &c); err != nil {
		return fmt.Errorf("train: data cursor: %w", err)
	}
	return s.l.Restore(c)
}

// shardedSource is one rank's share of a Source: of every ranks
// consecutive micro-batches of the stream, the rank-th. Every rank reads
// the whole stream (tokens are cheap next to the model), so the stream's
// cursor is the same on every rank at an update's end and a run resumes on
// any number of ranks that divides its micro-batches per update.
type shardedSource[B any] struct {
	inner       Source[B]
	rank, ranks int
	pending     int // micro-batches of later ranks not yet skipped
}

func (s *shardedSource[B]) skip(n int) error {
	for range n {
		if _, err := s.inner.Next(); err != nil {
			return err
		}
	}
	return nil
}

// Next skips the rest of the last round and the ranks before this one,
// then returns this rank's micro-batch: the batch it returns stays valid
// until the next call, as the inner source's do.
func (s *shardedSource[B]) Next() (B, error) {
	var zero B
	if err := s.skip(s.pending + s.rank); err != nil {
		return zero, err
	}
	s.pending = 0
	b, err := s.inner.Next()
	if err != nil {
		return zero, err
	}
	s.pending = s.ranks - 1 - s.rank
	return b, nil
}

// Cursor finishes the round (the last micro-batch returned is then no
// longer valid) and returns the stream's cursor.
func (s *shardedSource[B]) Cursor() ([]byte, error) {
	if err := s.skip(s.pending); err != nil {
		return nil, err
	}
	s.pending = 0
	return s.inner.Cursor()
}

func (s *shardedSource[B]) Seek(cursor []byte) error {
	s.pending = 0
	return s.inner.Seek(cursor)
}
