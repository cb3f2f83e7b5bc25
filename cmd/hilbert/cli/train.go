package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/dist"
	"github.com/hilbert-ml/hilbert/train"
)

func init() {
	register(subcommand{
		name:    "train",
		summary: "train the paper's transformer (no flags: a small model on Newton's Opticks)",
		run:     runTrain,
	})
}

const trainUsage = `usage: hilbert train [flags]

Trains the paper's decoder-only transformer with Muon on the blocks, AdamW on
the embedding and AdamW or RowNorm on the LM head, logging the head step's
exact row diameter D(S_t) and Hilbert RMS. Output goes to RUNS/NAME:
metrics.jsonl, checkpoints/, loss.png, diameter.png, hilbert_rms.png and
summary.md. One process at a time uses a run (RUNS/NAME/run.lock).

Ctrl-C, SIGTERM or SIGHUP stops after the current update, writes a
checkpoint and exits with status 130; -resume continues it exactly. A
resumed run must keep every setting that changes the numbers (it lists
any that differ); -steps may grow (updates past the original schedule run
at 0.1 of the peak rate), and the intervals, -quiet and -device ordinal
may change.

Data: -train and -val name llm.c shards (from hilbert prepare); or -text
names plain-text files tokenized on the fly (the first -text-val-tokens
tokens become the validation shard). With neither, the embedded default
job trains on $(go env GOROOT)/src/testdata/Isaac.Newton-Opticks.txt.

Settings come from -config, a YAML file whose keys are the flag names with
_ for - (text and train may be lists; a model section sets head_dim,
mlp_hidden, vocab, rope_base, init_std too), and then from flags, which
win; what neither sets keeps the defaults below.

flags:
`

// nothingToTrain is the message of a resume whose checkpoint is already at
// -steps: the run's validation at that update, as logged or (a checkpoint
// written on a signal, say) computed now as hilbert eval would.
func nothingToTrain(tr *train.Trainer, dev device.Device, comm dist.Communicator) (string, error) {
	cfg, step := tr.Config(), tr.Step()
	msg := fmt.Sprintf("run %s is already at update %d of -steps %d: nothing to train (raise -steps to continue it)", cfg.Name, step, cfg.Steps)
	if comm != nil && comm.Rank() != 0 {
		return msg, nil
	}
	hist := tr.History()
	if n := len(hist); n > 0 && hist[n-1].Step == step && hist[n-1].ValLoss != nil {
		r := hist[n-1]
		msg += fmt.Sprintf("; its validation at update %d: val loss %.4f", step, *r.ValLoss)
		if r.Diameter != nil {
			msg += fmt.Sprintf(", D(S_T) %.4g", *r.Diameter)
		}
		return msg, nil
	}
	autocast, err := cfg.AutocastDType()
	if err != nil {
		return "", err
	}
	loss, tokens, err := validationLoss(dev, tr.Model(), cfg.Sizes().Vocab, cfg.ValShard, cfg.ValTokens, cfg.SeqLen, cfg.MicroBatch, cfg.BlockRows, autocast)
	if err != nil {
		return "", err
	}
	return msg + fmt.Sprintf("; the checkpoint's validation, computed now: val loss %.4f over %d tokens", loss, tokens), nil
}

// exitInterrupted is the exit status of a run stopped by a signal (after
// writing its checkpoint): 128 + SIGINT, as shells report Ctrl-C.
const exitInterrupted = 130

// interruptedError is a run stopped by a signal; runMain prints it and
// exits with exitInterrupted.
type interruptedError struct {
	msg  string // what happened
	hint string // how to continue, if the checkpoint was written
}

func (e *interruptedError) Error() string {
	if e.hint == "" {
		return e.msg
	}
	return e.msg + ". " + e.hint
}

// trainSignals returns a context cancelled by SIGINT, SIGTERM or SIGHUP
// (a closed terminal or ssh session; not when SIGHUP was ignored at start,
// as nohup does): the run stops after its current update and writes a
// checkpoint. SIGPIPE is ignored, so that a closed
// pipe on stdout or stderr (| tee killed by the same Ctrl-C) fails writes,
// which are not checked, instead of killing the process. stop undoes it.
//
// A rank of mpirun also stops on SIGCONT: Open MPI's mpirun, told to stop
// (Ctrl-C or SIGTERM reach only it, the ranks being in their own process
// groups), sends each rank SIGCONT, then SIGTERM odls_base_sigkill_timeout
// seconds later (default 1) and SIGKILL as long again after that; the
// SIGCONT is the first word of it, and stopping on it doubles the time
// left to write the checkpoint.
func trainSignals(stderr io.Writer, mpiRank bool) (ctx context.Context, stop func()) {
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	// Under nohup (SIGHUP ignored from the start) a hangup stays ignored.
	if !signal.Ignored(syscall.SIGHUP) {
		signal.Notify(ch, syscall.SIGHUP)
	}
	if mpiRank {
		signal.Notify(ch, syscall.SIGCONT)
	}
	done := make(chan struct{})
	go func() {
		first := true
		for {
			select {
			case s := <-ch:
				if first && s == syscall.SIGCONT {
					fmt.Fprintf(stderr, "\nhilbert: %v: mpirun is stopping the job; stopping after the current update to write a checkpoint\n", s)
					cancel()
					first = false
				} else if first {
					fmt.Fprintf(stderr, "\nhilbert: %v: stopping after the current update to write a checkpoint\n", s)
					cancel()
					first = false
				} else {
					fmt.Fprintf(stderr, "\nhilbert: %v: already stopping; the checkpoint is being written\n", s)
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

func runTrain(args []string, stdout, stderr io.Writer) error {
	commTimeout := 5 * time.Minute
	st, err := parseTrainFlags("train", trainUsage, args, stderr, func(fs *flag.FlagSet) { rankFlags(fs, &commTimeout) })
	if st == nil || err != nil {
		return err
	}
	comm, err := launchRanks(st.dev, commTimeout)
	if err != nil {
		return err
	}
	defer comm.Close()
	if comm.Size() > 1 {
		return trainRanks(st, comm, stdout, stderr)
	}
	ctx, stop := trainSignals(stderr, false)
	defer stop()
	c := st.job.Config
	// The lock comes first: before -overwrite deletes anything and before
	// -text is tokenized into the run's folder.
	lock, err := lockRun(st, c, stderr)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if err := startRun(st, c, st.resume); err != nil {
		return err
	}
	pd, err := prepareData(ctx, &st.job, st.resume, stderr)
	defer pd.cleanup()
	if err != nil {
		return err
	}
	s, err := trainOne(ctx, st, st.job.Config, lock, st.resume, nil, stdout, stderr)
	if err == nil && pd.mismatch {
		// Resume refuses other data; this is only a second guard.
		err = pd.mismatchError()
	}
	if err != nil {
		return err
	}
	printRun(stdout, s)
	return nil
}

// rankFlags adds train's own flags (those of data-parallel runs) to the
// shared ones.
func rankFlags(fs *flag.FlagSet, commTimeout *time.Duration) {
	fs.Var(positiveDuration{commTimeout}, "comm-timeout", "under mpirun: the longest one collective may wait for the other ranks before this rank stops with an error naming it; a `duration` > 0")
}

// printRun prints a finished run's one-line summary.
func printRun(stdout io.Writer, s *runSummary) {
	if s.note != "" {
		fmt.Fprintln(stdout, s.note)
		return
	}
	fmt.Fprintf(stdout, "run %s: %d updates, %d tokens, train loss %.4f, val loss %.4f (from %.4f), D(S_T) %.4g, Hilbert RMS %.4g, %.0f tokens/s, %.0f s\n",
		s.Name, s.Steps, s.Tokens, s.FinalLoss, s.ValLoss, s.StartValLoss, s.Diameter, s.HilbertRMS, s.TokensPerS, s.ElapsedS)
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(s.Dir, "summary.md"))
}

// lockRun takes the lock of c's run folder.
func lockRun(st *trainSetup, c train.Config, stderr io.Writer) (*train.RunLock, error) {
	lock, err := train.LockRun(filepath.Join(c.RunsDir, c.Name), train.LockOptions{BreakStale: st.breakLock, Command: st.command})
	if err != nil {
		return nil, err
	}
	if lock.Broken != nil {
		fmt.Fprintf(stderr, "hilbert: -break-lock: took over the stale lock of %s\n", lock.Broken)
	}
	return lock, nil
}

// startRun checks that the run may start as asked (a checkpoint needs
// -resume or -overwrite; -resume needs a checkpoint) and, for
// -overwrite, removes the run's checkpoints and metrics. The run's lock
// must be held.
func startRun(st *trainSetup, c train.Config, resume bool) error {
	dir := filepath.Join(c.RunsDir, c.Name)
	has := train.HasCheckpoint(c)
	switch {
	case resume && !has:
		return fmt.Errorf("run %q has no checkpoint in %s to resume: run without -resume to start it", c.Name, dir)
	case !resume && !st.overwrite && has:
		return fmt.Errorf("run %q already has a checkpoint in %s: pass -resume to continue it or -overwrite to start over", c.Name, dir)
	case st.overwrite && !resume:
		if err := os.RemoveAll(filepath.Join(dir, "checkpoints")); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(dir, "metrics.jsonl")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// trainOne trains one run whose lock is held (the trainer releases it),
// showing its progress on stderr. An interrupted run (its checkpoint
// written) is an *interruptedError.
func trainOne(ctx context.Context, st *trainSetup, c train.Config, lock *train.RunLock, resume bool, comm dist.Communicator, stdout, stderr io.Writer) (*runSummary, error) {
	dev := st.dev
	opts := []train.Option{}
	if lock != nil {
		opts = append(opts, train.WithLock(lock))
	}
	if comm != nil {
		opts = append(opts, train.WithComm(comm))
	}
	tr, err := train.New(dev, c, opts...)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	if err := resumeAgreed(tr, dev, comm, resume); err != nil {
		return nil, err
	}
	for _, w := range tr.Warnings() {
		fmt.Fprintf(stderr, "hilbert: warning: %s\n", w)
	}
	cfg := tr.Config()
	if comm != nil && comm.Rank() != 0 {
		stderr = io.Discard
	}
	announceRun(stderr, tr, dev, resume)
	if resume && tr.Step() >= cfg.Steps {
		// Nothing to train: no run, no report rewritten; its validation.
		note, err := nothingToTrain(tr, dev, comm)
		if err != nil {
			return nil, err
		}
		return &runSummary{Summary: tr.Summary(), Dir: tr.Dir(), History: tr.History(), note: note}, nil
	}
	prog := newProgress(stderr, st.quiet, cfg.Head, cfg.Steps, tr.Step())
	err = tr.Run(ctx, func(t *train.Trainer, r train.Record) error {
		prog.record(r)
		return nil
	})
	prog.finish()
	if errors.Is(err, train.ErrInterrupted) {
		return nil, interrupted(err, c.Name, tr.Step(), st.resume)
	}
	if err != nil {
		return nil, err
	}
	return &runSummary{Summary: tr.Summary(), Dir: tr.Dir(), History: tr.History()}, nil
}

// resumeAgreed resumes tr from its checkpoint when resume is set. Every
// rank of a data-parallel run learns whether one could not (a collective
// call on every rank, resuming or not; the trainer then checks that all
// resumed the same checkpoint, or none did).
func resumeAgreed(tr *train.Trainer, dev device.Device, comm dist.Communicator, resume bool) error {
	var resumeErr error
	if resume {
		resumeErr = tr.Resume()
	}
	if comm != nil && comm.Size() > 1 {
		failed, err := anyFailed(comm, dev, resumeErr != nil)
		if err != nil {
			return err
		}
		if failed && resumeErr == nil {
			return errors.New("another rank could not resume the checkpoint (its error is above)")
		}
	}
	return resumeErr
}

// announceRun prints what is about to train: the model, its size and the
// updates, where it was initialised from, and where a resume continues.
func announceRun(stderr io.Writer, tr *train.Trainer, dev device.Device, resume bool) {
	cfg := tr.Config()
	size, params := cfg.Sizes(), 0
	for _, p := range tr.Model().Parameters() {
		params += p.Len()
	}
	fmt.Fprintf(stderr, "hilbert: %s on %s: %s d %d, %d layers, vocab %d, %d params; head %s; %d updates of %d x %d tokens\n",
		cfg.Name, dev.Name(), cfg.FamilyName(), size.Dim, size.Layers, size.Vocab, params, cfg.Head,
		cfg.Steps, cfg.BatchSeqs, cfg.SeqLen)
	if cfg.InitHF != "" && !resume {
		fmt.Fprintf(stderr, "hilbert: initialised from %s (init_hf %s)\n", cfg.InitHF, tr.InitHF())
	}
	if resume {
		note := ""
		if cfg.Steps > cfg.ScheduleSteps {
			note = fmt.Sprintf("; the schedule ends at update %d, later updates run at 0.1 of the peak rate", cfg.ScheduleSteps)
		}
		fmt.Fprintf(stderr, "hilbert: resuming %s at update %d of %d%s\n", cfg.Name, tr.Step(), cfg.Steps, note)
	}
}

// interrupted is the *interruptedError of run name stopped at update step
// (err wraps train.ErrInterrupted): it says whether the checkpoint was
// written and how to continue (a command that has -resume already
// continues the run as it is).
func interrupted(err error, name string, step int, hasResume bool) error {
	if err != train.ErrInterrupted { // the checkpoint or the report failed
		return &interruptedError{msg: fmt.Sprintf("%s interrupted at update %d: %v", name, step, err)}
	}
	hint := "Continue with the same command and -resume"
	if hasResume {
		hint = "Continue with the same command"
	}
	return &interruptedError{msg: fmt.Sprintf("%s interrupted at update %d; checkpoint written", name, step), hint: hint}
}

// runSummary is a finished run: its summary, folder and records.
type runSummary struct {
	train.Summary
	Dir     string
	History []train.Record
	// note, when set, is what printRun prints instead: a resume that
	// found nothing to train.
	note string
}
