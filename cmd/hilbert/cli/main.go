// Package cli is the whole hilbert command as a library: cmd/hilbert's main
// is one call to Main, and a user's own program that registers its model
// family with models/registry and calls Main gets every subcommand (train,
// sample, eval, export, compare, view, bench, mpirun through the same
// flags) for it.
//
// Each subcommand lives in its own file and registers itself in init with
// register, so that independent parts of the tool (data preparation,
// benchmarks, training) can grow without touching one another.
//
// Usage:
//
//	hilbert <subcommand> [flags]
//	hilbert [train flags]       (no subcommand: train)
//	hilbert help
//
// Exit status: 0 on success, 1 on an error, 2 on a usage error (an unknown
// subcommand or flag, a bad value, a bad config file; it prints the error
// and a hint at -h), and 130 when a run was stopped by a signal (SIGINT,
// SIGTERM or SIGHUP) after writing its checkpoint.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

// subcommand is one verb of the hilbert tool.
type subcommand struct {
	name    string
	summary string
	// run executes the subcommand with its arguments (without the verb)
	// and returns an error to be printed; it writes normal output to stdout.
	run func(args []string, stdout, stderr io.Writer) error
}

var subcommands = map[string]subcommand{}

// register adds a subcommand; it is called from init functions.
func register(c subcommand) {
	if _, dup := subcommands[c.name]; dup {
		panic("hilbert: subcommand registered twice: " + c.name)
	}
	subcommands[c.name] = c
}

// defaultSubcommand runs when hilbert is started with no arguments.
const defaultSubcommand = "train"

// Main runs the hilbert command with the process's arguments and exits with
// its status (see the package doc). It does not return.
func Main() {
	os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr))
}

// Run runs the hilbert command with args (without the program name),
// writing normal output to stdout and errors to stderr, and returns the
// exit status: 0 done, 1 error, 2 usage error, 130 stopped by a signal
// after writing a checkpoint.
func Run(args []string, stdout, stderr io.Writer) int {
	name := defaultSubcommand
	switch {
	case len(args) == 0:
	case args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		usage(stdout)
		return 0
	case strings.HasPrefix(args[0], "-"):
		// Flags with no subcommand are train's: hilbert -resume.
	default:
		name, args = args[0], args[1:]
	}
	c, ok := subcommands[name]
	if !ok {
		fmt.Fprintf(stderr, "hilbert: unknown subcommand %q\n\n", name)
		usage(stderr)
		return exitUsage
	}
	if err := c.run(args, stdout, stderr); err != nil {
		if !errors.As(err, new(*reportedError)) {
			fmt.Fprintf(stderr, "hilbert %s: %v\n", name, err)
		}
		var ie *interruptedError
		if errors.As(err, &ie) {
			return exitInterrupted
		}
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "run 'hilbert %s -h' for the flags\n", ue.cmd)
			return exitUsage
		}
		return 1
	}
	return 0
}

// reportedError is an error its command has already written to stderr,
// as Run would ("hilbert CMD: ..."): a rank that fails while others wait
// for it says why before they learn of it and exit, since mpirun may end
// the job before the rank gets back to Run.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// report writes err as Run would for command cmd and returns it marked as
// reported, so that Run does not write it again.
func report(stderr io.Writer, cmd string, err error) error {
	fmt.Fprintf(stderr, "hilbert %s: %v\n", cmd, err)
	return &reportedError{err}
}

// exitUsage is the exit status of a usage error.
const exitUsage = 2

// usageError is a usage error: an unknown flag, a bad value, a bad config
// file, flags that do not go together. runMain prints it with a one-line
// hint at the command's -h (not the whole usage) and exits with
// exitUsage.
type usageError struct {
	cmd string // the command whose -h lists the flags: "train", "bench gemm"
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErr wraps err (nil stays nil) as a usage error of cmd.
func usageErr(cmd string, err error) error {
	if err == nil {
		return nil
	}
	return &usageError{cmd: cmd, err: err}
}

// newFlagSet returns a subcommand's flag set. It writes to stderr, and its
// -h prints usage (unless empty: the flag package's default then) and the
// flags.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if usage != "" {
		fs.Usage = func() {
			fmt.Fprint(stderr, usage)
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseCommand parses a subcommand's args with fs (parseFlags) and
// refuses positional arguments. stop says that the subcommand must return
// err at once: after -h (err is nil: the usage was printed) or on a usage
// error.
func parseCommand(fs *flag.FlagSet, args []string) (stop bool, err error) {
	if stop, err := parseCommandArgs(fs, args); stop {
		return true, err
	}
	if fs.NArg() > 0 {
		return true, usageErr(fs.Name(), fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	return false, nil
}

// parseCommandArgs is parseCommand for a subcommand that takes positional
// arguments (fs.Args()).
func parseCommandArgs(fs *flag.FlagSet, args []string) (stop bool, err error) {
	err = parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return true, nil
	}
	return err != nil, err
}

// parseFlags parses args with fs (from newFlagSet). After -h it prints
// fs's usage (the flag package's default where newFlagSet set none) and
// returns flag.ErrHelp. A bad or unknown flag or value is a *usageError,
// which the flag package does not print: runMain prints it, with a hint
// instead of the usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return flag.ErrHelp
	case err != nil:
		return usageErr(fs.Name(), err)
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: hilbert <subcommand> [flags]")
	fmt.Fprintln(w, "\nsubcommands:")
	for _, n := range slices.Sorted(maps.Keys(subcommands)) {
		fmt.Fprintf(w, "  %-10s %s\n", n, subcommands[n].summary)
	}
	fmt.Fprintf(w, "\nWith no subcommand (or only flags), hilbert runs %q: hilbert -resume is hilbert %s -resume.\n", defaultSubcommand, defaultSubcommand)
	fmt.Fprintln(w, "Exit status: 0 done, 1 error, 2 usage error, 130 stopped by a signal after writing a checkpoint.")
}
