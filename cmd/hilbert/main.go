// Command hilbert is the command-line front end of the Hilbert framework:
// train, compare, view, prepare, sample, eval, bench, devices and oracle. Its code
// is the library package cmd/hilbert/cli, so that a user's own program can
// register a model family and run the same command with cli.Main.
//
// Usage:
//
//	hilbert <subcommand> [flags]
//	hilbert [train flags]       (no subcommand: train)
//	hilbert help
package main

import "github.com/hilbert-ml/hilbert/cmd/hilbert/cli"

func main() { cli.Main() }
