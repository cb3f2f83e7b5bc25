package data

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hilbert-ml/hilbert/tokenizer"
)

// LoaderConfig says which shards to read and how to cut them into batches.
type LoaderConfig struct {
	// Shards are the training shard files (see Glob).
	Shards []string
	// Vocab is the vocabulary size every token must be below; 0 means
	// tokenizer.VocabSize.
	Vocab int
	// SeqLen (T) is the number of positions per sequence. Sequence i of a
	// shard is tokens[i*T : i*T+T+1]: inputs are its first T tokens, targets
	// its last T.
	SeqLen int
	// MicroBatch (B) is the number of sequences each Next returns.
	MicroBatch int
	// BatchSeqs is the number of sequences per optimizer batch, a multiple of
	// MicroBatch; 0 means MicroBatch. Whole optimizer batches are the unit of
	// shuffling; the sequences left over at the end of a shard are dropped.
	BatchSeqs int
	// Seed fixes the order: per epoch, the shard order and the order of the
	// optimizer batches inside each shard are permutations drawn from it.
	Seed uint64
	// Prefetch is the number of micro-batches read ahead in the background
	// (never reordered); 0 means 4, negative turns prefetching off.
	Prefetch int
}

// Cursor is the position of a Loader: the next micro-batch Next returns. It
// is small and JSON-serialisable; save it with a checkpoint and pass it to
// Restore so a resumed run sees exactly the batches it would have seen.
type Cursor struct {
	Epoch int `json:"epoch"`
	Shard int `json:"shard"` // index into the epoch's shard order
	Batch int `json:"batch"` // index into the shard's optimizer-batch order
	Micro int `json:"micro"` // micro-batch inside the optimizer batch
}

// Loader yields training micro-batches in a deterministic order. It is not
// safe for concurrent use.
type Loader struct {
	cfg      LoaderConfig
	shards   []*Shard
	nBatches []int // optimizer batches per shard
	microPer int   // micro-batches per optimizer batch
	cur      Cursor
	err      error // a read error, returned by every later Next

	// own is the caller's goroutine's reader (Restore's checks and Next
	// without prefetching); the prefetcher has its own, so the two share
	// nothing mutable.
	own *reader

	// prefetch
	ch   chan prefetched
	stop chan struct{}
	wg   sync.WaitGroup
	free chan []int32
}

// reader turns cursors into micro-batches. It caches the last shard and
// batch permutations and holds the read buffer; one goroutine uses it.
type reader struct {
	l          *Loader
	orderEpoch int
	order      []int
	batchKey   [2]int
	batchPerm  []int
	toks       []uint16 // B*T+1 tokens of one micro-batch
	seqs       []int32  // B*(T+1): Next's buffer without prefetching
}

type prefetched struct {
	buf  []int32 // B*(T+1) tokens, one sequence after another
	next Cursor  // cursor after this micro-batch
	err  error
}

// Glob returns the files matching pattern, sorted; it fails if none match.
func Glob(pattern string) ([]string, error) {
	m, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("data: glob %q: %w", pattern, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("data: glob %q: no shard files match", pattern)
	}
	slices.Sort(m)
	return m, nil
}

// NewLoader opens and checks the shards (header, size, vocabulary, and
// the manifest of their folder: see VerifyManifest) and starts at the
// first micro-batch of epoch 0.
func NewLoader(cfg LoaderConfig) (*Loader, error) {
	cfg.Vocab = cmp.Or(cfg.Vocab, tokenizer.VocabSize)
	cfg.BatchSeqs = cmp.Or(cfg.BatchSeqs, cfg.MicroBatch)
	cfg.Prefetch = cmp.Or(cfg.Prefetch, 4)
	switch {
	case len(cfg.Shards) == 0:
		return nil, errors.New("data: loader: Shards: expected at least one shard")
	case cfg.SeqLen <= 0:
		return nil, fmt.Errorf("data: loader: SeqLen: expected > 0, got %d", cfg.SeqLen)
	case cfg.MicroBatch <= 0:
		return nil, fmt.Errorf("data: loader: MicroBatch: expected > 0, got %d", cfg.MicroBatch)
	case cfg.BatchSeqs%cfg.MicroBatch != 0 || cfg.BatchSeqs < 0:
		return nil, fmt.Errorf("data: loader: BatchSeqs: expected a positive multiple of MicroBatch %d, got %d", cfg.MicroBatch, cfg.BatchSeqs)
	}
	l := &Loader{cfg: cfg, microPer: cfg.BatchSeqs / cfg.MicroBatch}
	l.own = l.newReader()
	total := 0
	for _, p := range cfg.Shards {
		s, err := OpenShard(p, cfg.Vocab)
		if err != nil {
			l.closeShards()
			return nil, err
		}
		l.shards = append(l.shards, s)
		n := 0
		if s.Len() > 0 {
			n = (s.Len() - 1) / cfg.SeqLen / cfg.BatchSeqs
		}
		l.nBatches = append(l.nBatches, n)
		total += n
	}
	if err := verifyTraining(l.shards); err != nil {
		l.closeShards()
		return nil, err
	}
	if total == 0 {
		l.closeShards()
		return nil, fmt.Errorf("data: loader: no shard holds one optimizer batch of %d sequences of %d+1 tokens", cfg.BatchSeqs, cfg.SeqLen)
	}
	l.cur = l.own.normalize(Cursor{})
	l.start()
	return l, nil
}

// Sums returns each training shard's token count and checksum, in the
// order of LoaderConfig.Shards: computed as NewLoader read every shard in
// full and checked it against its manifest.
func (l *Loader) Sums() []ShardSum {
	out := make([]ShardSum, len(l.shards))
	for i, s := range l.shards {
		out[i] = s.Sum()
	}
	return out
}

// Verify checks that no training shard changed since NewLoader read it
// (see Shard.Verify): an error names the first that did.
func (l *Loader) Verify() error {
	for _, s := range l.shards {
		if err := s.Verify(); err != nil {
			return err
		}
	}
	return nil
}

// BatchesPerEpoch returns the number of optimizer batches in one epoch.
func (l *Loader) BatchesPerEpoch() int {
	n := 0
	for _, b := range l.nBatches {
		n += b
	}
	return n
}

// Cursor returns the position of the next micro-batch Next will return.
func (l *Loader) Cursor() Cursor { return l.cur }

// Restore moves the loader to c, as returned by Cursor (possibly by another
// Loader with the same configuration).
func (l *Loader) Restore(c Cursor) error {
	if c.Epoch < 0 || c.Shard < 0 || c.Shard >= len(l.shards) || c.Batch < 0 || c.Micro < 0 || c.Micro >= l.microPer {
		return fmt.Errorf("data: loader: restore: cursor %+v out of range for %d shards, %d micro-batches per batch", c, len(l.shards), l.microPer)
	}
	order := l.own.shardOrder(c.Epoch)
	if c.Batch >= l.nBatches[order[c.Shard]] && !(c.Batch == 0 && l.nBatches[order[c.Shard]] == 0) {
		return fmt.Errorf("data: loader: restore: cursor batch %d out of range for shard %s with %d batches", c.Batch, l.shards[order[c.Shard]].path, l.nBatches[order[c.Shard]])
	}
	l.halt()
	l.cur, l.err = l.own.normalize(c), nil
	l.start()
	return nil
}

// Next fills inputs and targets, each of MicroBatch*SeqLen int32, with the
// next micro-batch: row b of inputs is sequence b's first T tokens, row b of
// targets its last T. The loader cycles through epochs without end.
func (l *Loader) Next(inputs, targets []int32) error {
	B, T := l.cfg.MicroBatch, l.cfg.SeqLen
	if len(inputs) != B*T || len(targets) != B*T {
		return fmt.Errorf("data: loader: next: expected inputs and targets of %d*%d=%d, got %d and %d", B, T, B*T, len(inputs), len(targets))
	}
	if l.err != nil {
		return l.err
	}
	var buf []int32
	if l.ch != nil {
		p := <-l.ch
		if p.err != nil {
			l.err = p.err
			return p.err
		}
		buf, l.cur = p.buf, p.next
		defer func() { l.free <- buf }()
	} else {
		buf = l.own.seqs
		next, err := l.own.fill(buf, l.cur)
		if err != nil {
			l.err = err
			return err
		}
		l.cur = next
	}
	for b := 0; b < B; b++ {
		seq := buf[b*(T+1) : (b+1)*(T+1)]
		copy(inputs[b*T:(b+1)*T], seq[:T])
		copy(targets[b*T:(b+1)*T], seq[1:])
	}
	return nil
}

// Close stops prefetching and unmaps the shards.
func (l *Loader) Close() error {
	l.halt()
	return l.closeShards()
}

func (l *Loader) closeShards() error {
	var err error
	for _, s := range l.shards {
		err = errors.Join(err, s.Close())
	}
	l.shards = nil
	return err
}

func (l *Loader) newReader() *reader {
	B, T := l.cfg.MicroBatch, l.cfg.SeqLen
	return &reader{l: l, toks: make([]uint16, B*T+1), seqs: make([]int32, B*(T+1))}
}

// shardOrder returns the permutation of shard indices for an epoch.
func (r *reader) shardOrder(epoch int) []int {
	if r.order == nil || r.orderEpoch != epoch {
		r.order, r.orderEpoch = permutation(len(r.l.shards), r.l.cfg.Seed, uint64(epoch), 0), epoch
	}
	return r.order
}

// batchOrder returns the permutation of optimizer batches in a shard.
func (r *reader) batchOrder(epoch, shard int) []int {
	if key := [2]int{epoch, shard}; r.batchPerm == nil || r.batchKey != key {
		r.batchPerm, r.batchKey = permutation(r.l.nBatches[shard], r.l.cfg.Seed, uint64(epoch), uint64(shard)+1), key
	}
	return r.batchPerm
}

// normalize moves c past shards without batches.
func (r *reader) normalize(c Cursor) Cursor {
	order := r.shardOrder(c.Epoch)
	for c.Batch >= r.l.nBatches[order[c.Shard]] {
		c.Batch, c.Micro = 0, 0
		c.Shard++
		if c.Shard == len(order) {
			c.Shard = 0
			c.Epoch++
			order = r.shardOrder(c.Epoch)
		}
	}
	return c
}

// fill writes the B sequences of micro-batch c into buf and returns the
// cursor after it. c must be normalized. The B sequences are contiguous
// in the shard, so they are read with one pread of B*T+1 tokens.
func (r *reader) fill(buf []int32, c Cursor) (Cursor, error) {
	l := r.l
	B, T := l.cfg.MicroBatch, l.cfg.SeqLen
	shard := r.shardOrder(c.Epoch)[c.Shard]
	batch := r.batchOrder(c.Epoch, shard)[c.Batch]
	first := batch*l.cfg.BatchSeqs + c.Micro*B
	if err := l.shards[shard].ReadTokens(r.toks, first*T); err != nil {
		return c, err
	}
	for b := 0; b < B; b++ {
		seq := r.toks[b*T : b*T+T+1]
		dst := buf[b*(T+1) : (b+1)*(T+1)]
		for i, t := range seq {
			dst[i] = int32(t)
		}
	}
	c.Micro++
	if c.Micro == l.microPer {
		c.Micro = 0
		c.Batch++
	}
	return r.normalize(c), nil
}

// start launches the prefetcher from l.cur.
func (l *Loader) start() {
	if l.cfg.Prefetch < 0 {
		return
	}
	n := l.cfg.Prefetch
	l.ch = make(chan prefetched, n)
	l.free = make(chan []int32, n+2)
	for range n + 2 {
		l.free <- make([]int32, l.cfg.MicroBatch*(l.cfg.SeqLen+1))
	}
	l.stop = make(chan struct{})
	l.wg.Add(1)
	go func(r *reader, c Cursor, ch chan<- prefetched, free <-chan []int32, stop <-chan struct{}) {
		defer l.wg.Done()
		for {
			var buf []int32
			select {
			case buf = <-free:
			case <-stop:
				return
			}
			next, err := r.fill(buf, c)
			select {
			case ch <- prefetched{buf, next, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
			c = next
		}
	}(l.newReader(), l.cur, l.ch, l.free, l.stop)
}

// halt stops the prefetcher and drops what it read ahead.
func (l *Loader) halt() {
	if l.stop == nil {
		return
	}
	close(l.stop)
	l.wg.Wait()
	l.stop, l.ch, l.free = nil, nil, nil
}
