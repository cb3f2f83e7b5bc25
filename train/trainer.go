package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hilbert-ml/hilbert/autograd"
	"github.com/hilbert-ml/hilbert/data"
	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/dist"
	"github.com/hilbert-ml/hilbert/internal/regfile"
	"github.com/hilbert-ml/hilbert/models/registry"
	"github.com/hilbert-ml/hilbert/optim"
	"github.com/hilbert-ml/hilbert/tensor"
)

// ErrInterrupted is returned by Run when its context was cancelled: the
// run stopped after a whole update and wrote a checkpoint to resume from.
var ErrInterrupted = errors.New("train: interrupted (checkpoint written; run again with resume to continue)")

// Hook is called after every update with its record, and once before the
// first update with the step-0 record (the starting validation loss; no
// gradient or step exists yet); returning an error stops the run with that
// error (no checkpoint is written for it).
type Hook func(t *Trainer, r Record) error

// Trainer trains one model with one optimizer recipe.
type Trainer struct {
	cfg    Config
	dev    device.Device
	model  *runModel
	opt    *optim.Set
	sched  optim.Cosine
	loader *data.Loader
	val    *data.ValLoader
	loop   *Loop[Tokens]
	g      *autograd.Graph // the loop's graph

	inputs, targets *tensor.Tensor
	hostIn, hostTgt []int32

	step    int // updates done
	metrics *metricsWriter
	history []Record
	elapsed time.Duration // training time before this process (resume)
	tokens  int64         // training tokens seen

	raw      Config   // the config as given, before defaults (see Resume)
	lock     *RunLock // the run folder's lock (rank 0's), released by Close
	comm     dist.Communicator
	rank     int
	resumed  bool   // Resume restored a checkpoint
	resumeAt string // what Resume restored (update and digest), agreed by the ranks
	dataID   [2]string
	initHF   string // the init_hf setting: InitHF's fingerprint, or noInitHF
	warnings []string
}

// Option tunes New.
type Option func(*options)

type options struct {
	lock *RunLock
	comm dist.Communicator
}

// WithComm makes the run data-parallel over the communicator's ranks (one
// process each, started by mpirun): each rank takes its share of every
// update's sequences (BatchSeqs = ranks x MicroBatch x accumulation), the
// gradients are averaged over the ranks, and every rank takes the same
// step. Rank 0 alone holds the run's lock and writes metrics, checkpoints
// and the report; every rank reads the same files on resume, so the ranks
// share one file system. New checks that every rank has the same settings
// and data.
func WithComm(c dist.Communicator) Option { return func(o *options) { o.comm = c } }

// WithLock hands New a lock on the run's folder that the caller already
// holds (from LockRun, taken before preparing the run's data, say): the
// trainer owns it from then on and releases it on Close (or when New
// fails). Without it New takes the lock itself.
func WithLock(l *RunLock) Option { return func(o *options) { o.lock = l } }

// New builds the model, the optimizer set and the data loaders of a fresh
// run. Call Resume before Run to continue from a checkpoint instead.
//
// The trainer holds the lock of the run's folder (see LockRun) from New to
// Close: a second trainer of the same run, in this process or another,
// fails with ErrLocked.
func New(dev device.Device, cfg Config, opts ...Option) (t *Trainer, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	raw := cfg
	cfg, rank, err := checkRun(cfg, o.comm)
	if err != nil {
		if o.lock != nil {
			o.lock.Unlock()
		}
		return nil, err
	}
	lock := o.lock
	dir := filepath.Join(cfg.RunsDir, cfg.Name)
	if lock == nil && rank == 0 {
		if lock, err = LockRun(dir, LockOptions{}); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil && lock != nil {
			lock.Unlock()
		}
	}()
	if lock != nil && !regfile.SamePath(lock.Dir(), dir) {
		return nil, fmt.Errorf("train: WithLock: the lock is on %s, the run's folder is %s", lock.Dir(), dir)
	}
	if dt, _ := cfg.ModelDType(); dt == device.Float64 && device.Describe(dev).Kind != "cpu" {
		return nil, fmt.Errorf("train: dtype = float64 runs on the CPU (the device is %s)", dev.Name())
	}
	t = &Trainer{cfg: cfg, raw: raw, lock: lock, dev: dev, comm: o.comm, rank: rank}
	if err = t.setupModel(); err != nil {
		return nil, err
	}
	if err = t.openData(); err != nil {
		return nil, err
	}
	return t, nil
}

// checkRun applies cfg's defaults and checks it before anything is
// allocated: the limits (limits.go), and that each update's micro-batches
// split evenly over comm's ranks. It returns this process's rank.
func checkRun(cfg Config, comm dist.Communicator) (Config, int, error) {
	cfg, err := cfg.WithDefaults()
	if err == nil {
		err = checkLimits(cfg)
	}
	if err != nil {
		return cfg, 0, err
	}
	ranks, rank := 1, 0
	if comm != nil {
		ranks, rank = comm.Size(), comm.Rank()
	}
	if accum := cfg.BatchSeqs / cfg.MicroBatch; accum%ranks != 0 {
		return cfg, 0, fmt.Errorf("train: batch_seqs %d = ranks x micro_batch x accumulation does not hold for %d ranks of micro-batches of %d sequences: %d micro-batches per update do not split over %d ranks",
			cfg.BatchSeqs, ranks, cfg.MicroBatch, accum, ranks)
	}
	return cfg, rank, nil
}

// setupModel builds the model (from the Hugging Face directory of
// init_hf, if set), its optimizer set and the schedule.
func (t *Trainer) setupModel() (err error) {
	cfg := t.cfg
	if t.model, err = buildModel(t.dev, cfg); err != nil {
		return fmt.Errorf("train: model: %w", err)
	}
	if err = t.initFromHF(); err != nil {
		return err
	}
	recipe, err := t.model.recipe(cfg)
	if err != nil {
		return fmt.Errorf("train: optimizer: %w", err)
	}
	if t.opt, err = optim.NewSet(recipe, t.model.model.Parameters()); err != nil {
		return fmt.Errorf("train: optimizer: %w", err)
	}
	if t.sched, err = optim.NewCosine(cfg.ScheduleSteps, cfg.WarmupSteps()); err != nil {
		return fmt.Errorf("train: schedule: %w", err)
	}
	return nil
}

// openData opens the training and validation data, builds the loop over
// them (agreed by every rank of a data-parallel run) and allocates the
// micro-batch's token tensors. What it opened is closed when it fails.
func (t *Trainer) openData() (err error) {
	cfg := t.cfg
	if t.loader, err = data.NewLoader(data.LoaderConfig{
		Shards: cfg.TrainShards, Vocab: t.model.vocab, SeqLen: cfg.SeqLen,
		MicroBatch: cfg.MicroBatch, BatchSeqs: cfg.BatchSeqs, Seed: cfg.DataSeed,
	}); err != nil {
		return fmt.Errorf("train: data: %w", err)
	}
	if t.val, err = t.openValidation(); err != nil {
		t.loader.Close()
		return err
	}
	autocast, _ := cfg.AutocastDType()
	if t.loop, err = NewLoop(t.dev, LM(t.dev, t.model.lm), LoaderSource(t.loader, cfg.MicroBatch, cfg.SeqLen), t.opt, LoopConfig{
		Accumulate: cfg.BatchSeqs / cfg.MicroBatch, ClipNorm: cfg.ClipNorm,
		Schedule: trainerSchedule{t}, Autocast: autocast, Comm: t.comm,
	}); err != nil {
		t.loader.Close()
		t.val.Close()
		return err
	}
	t.g = t.loop.Graph()
	if t.comm != nil && t.comm.Size() > 1 {
		if err = t.agree(); err != nil {
			t.loader.Close()
			t.val.Close()
			return err
		}
	}
	n := cfg.MicroBatch * cfg.SeqLen
	t.hostIn, t.hostTgt = make([]int32, n), make([]int32, n)
	if t.inputs, err = tensor.NewOf(t.dev, device.Int32, cfg.MicroBatch, cfg.SeqLen); err != nil {
		return err
	}
	t.targets, err = tensor.NewOf(t.dev, device.Int32, cfg.MicroBatch, cfg.SeqLen)
	return err
}

// openValidation opens the validation prefix, cut to what the shard holds.
func (t *Trainer) openValidation() (*data.ValLoader, error) {
	sh, err := data.OpenShard(t.cfg.ValShard, t.model.vocab)
	if err != nil {
		return nil, fmt.Errorf("train: validation: %w", err)
	}
	have := sh.Len()
	sh.Close()
	n := min(t.cfg.ValTokens, have)
	if n < t.cfg.SeqLen+1 {
		return nil, fmt.Errorf("train: validation shard %s holds %d tokens, fewer than seq_len+1 = %d", t.cfg.ValShard, have, t.cfg.SeqLen+1)
	}
	t.cfg.ValTokens = n
	v, err := data.Validation(t.cfg.ValShard, n, t.cfg.SeqLen, t.cfg.MicroBatch)
	if err != nil {
		return nil, fmt.Errorf("train: validation: %w", err)
	}
	return v, nil
}

// Config returns the run's configuration with defaults applied.
func (t *Trainer) Config() Config { return t.cfg }

// Model returns the model being trained (a *models.Transformer for the
// paper's family, a *models.GPT2 for gpt2, ...).
func (t *Trainer) Model() registry.Model { return t.model.model }

// Head returns the LM head's weight [vocab, dim], whose steps D(S_t) and
// the Hilbert RMS measure; nil for a head tied to the embedding.
func (t *Trainer) Head() *tensor.Tensor { return t.model.head }

// Optimizer returns the optimizer set.
func (t *Trainer) Optimizer() *optim.Set { return t.opt }

// Step returns the number of updates done.
func (t *Trainer) Step() int { return t.step }

// History returns the records logged so far (including those read back
// on resume).
func (t *Trainer) History() []Record { return t.history }

// Dir returns the run's folder.
func (t *Trainer) Dir() string { return filepath.Join(t.cfg.RunsDir, t.cfg.Name) }

// Warnings returns what the trainer noticed and worked around (a torn
// last line of metrics.jsonl, say), for the caller to show.
func (t *Trainer) Warnings() []string { return t.warnings }

// Close releases the data loaders and the run's lock. It is safe to call
// more than once.
func (t *Trainer) Close() error {
	var err error
	if t.loader != nil {
		err = t.loader.Close()
		t.loader = nil
	}
	if t.val != nil {
		err = firstError(err, t.val.Close())
		t.val = nil
	}
	if t.metrics != nil {
		err = firstError(err, t.metrics.Close())
		t.metrics = nil
	}
	if t.lock != nil {
		err = firstError(err, t.lock.Unlock())
	}
	return err
}

// Run trains until Steps updates are done, the context is cancelled
// (ErrInterrupted, after a checkpoint and, once an update is done, the
// report of the run so far) or an error stops it. A fresh run
// first validates the initial model (a record of update 0, passed to the
// hook too). At the end it validates, computes the diagnostics, writes a
// checkpoint, the plots and the summary.
func (t *Trainer) Run(ctx context.Context, hook Hook) error {
	if err := t.agreeStart(); err != nil {
		return err
	}
	if err := t.startMetrics(); err != nil {
		return err
	}
	start := time.Now()
	if t.step == 0 && len(t.history) == 0 && ctx.Err() == nil {
		if err := t.validateStart(start, hook); err != nil {
			return err
		}
	}
	for t.step < t.cfg.Steps {
		stop, err := t.anyRank(ctx.Err() != nil)
		if err != nil {
			return err
		}
		if stop {
			t.elapsed += time.Since(start)
			return t.interrupted()
		}
		r, err := t.update()
		if err != nil {
			return err
		}
		last := t.step == t.cfg.Steps
		r.ElapsedS = (t.elapsed + time.Since(start)).Seconds()
		if err := t.measure(&r, last); err != nil {
			return err
		}
		if hook != nil {
			if err := hook(t, r); err != nil {
				return err
			}
		}
		if last || (t.cfg.CheckpointEvery > 0 && t.step%t.cfg.CheckpointEvery == 0) {
			t.elapsed += time.Since(start)
			start = time.Now()
			if err := t.SaveCheckpoint(); err != nil {
				return err
			}
		}
	}
	if err := t.metrics.Sync(); err != nil {
		return err
	}
	if t.rank != 0 {
		return nil
	}
	return t.WriteReport()
}

// startMetrics opens the run's metrics.jsonl on rank 0 (appending after
// the resumed update, or a new file), and a writer of nothing on the
// other ranks.
func (t *Trainer) startMetrics() error {
	if err := os.MkdirAll(t.Dir(), 0o755); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if t.metrics == nil && t.rank != 0 {
		t.metrics = &metricsWriter{}
	}
	if t.metrics != nil {
		return nil
	}
	path := filepath.Join(t.Dir(), "metrics.jsonl")
	var err error
	if t.resumed {
		t.metrics, err = openMetrics(path, t.step)
	} else {
		t.metrics, err = createMetrics(path)
	}
	return err
}

// validateStart records the starting loss, the validation of the initial
// model, as update 0 (written, kept and passed to the hook).
func (t *Trainer) validateStart(start time.Time, hook Hook) error {
	r := Record{Step: 0}
	if err := t.validate(&r); err != nil {
		return err
	}
	r.ElapsedS = (t.elapsed + time.Since(start)).Seconds()
	if err := t.metrics.Write(r); err != nil {
		return err
	}
	t.history = append(t.history, r)
	if hook != nil {
		return hook(t, r)
	}
	return nil
}

// interrupted ends a stopped run: a checkpoint, then the report of what
// the run has so far (its summary says it was interrupted; the checkpoint
// is in force either way), and ErrInterrupted.
func (t *Trainer) interrupted() error {
	if err := t.SaveCheckpoint(); err != nil {
		return fmt.Errorf("%w (and the checkpoint failed: %v)", ErrInterrupted, err)
	}
	if t.rank == 0 && t.step > 0 {
		if err := t.WriteReport(); err != nil {
			return fmt.Errorf("%w (the checkpoint is written; the report failed: %v)", ErrInterrupted, err)
		}
	}
	return ErrInterrupted
}

// update runs one optimizer update (the loop's, in the paper's order)
// and returns its record (without validation and diagnostics).
func (t *Trainer) update() (Record, error) {
	u, err := t.loop.Update()
	if err != nil {
		return Record{Step: t.step + 1}, err
	}
	t.step = t.loop.Step()
	tokens := int64(t.cfg.BatchSeqs * t.cfg.SeqLen)
	t.tokens += tokens
	r := Record{
		Step: t.step, Loss: u.Loss, LRScale: u.LRScale, GradNorm: u.GradNorm,
		Tokens: t.tokens, TokensPerS: float64(tokens) / u.Duration.Seconds(),
	}
	if t.loop.comm != nil {
		c := u.Comm.Seconds()
		r.CommS = &c
	}
	return r, nil
}

// trainerSchedule is the trainer's schedule (which Resume may replace by
// the checkpoint's) as the loop's.
type trainerSchedule struct{ t *Trainer }

func (s trainerSchedule) Scale(step int) float64 { return s.t.sched.Scale(step) }
