// Command hilbert is the command-line front end of the Hilbert framework.
//
// Each subcommand lives in its own file and registers itself in init with
// register, so that independent parts of the tool (data preparation,
// benchmarks, training) can grow without touching one another.
//
// Usage:
//
//	hilbert <subcommand> [flags]
//	hilbert help
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
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

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	name := defaultSubcommand
	if len(args) > 0 {
		name, args = args[0], args[1:]
	}
	if name == "help" || name == "-h" || name == "--help" {
		usage(stdout)
		return 0
	}
	c, ok := subcommands[name]
	if !ok {
		fmt.Fprintf(stderr, "hilbert: unknown subcommand %q\n\n", name)
		usage(stderr)
		return 2
	}
	if err := c.run(args, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "hilbert %s: %v\n", name, err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: hilbert <subcommand> [flags]")
	fmt.Fprintln(w, "\nsubcommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, subcommands[n].summary)
	}
	fmt.Fprintf(w, "\nWith no subcommand, hilbert runs %q.\n", defaultSubcommand)
}
