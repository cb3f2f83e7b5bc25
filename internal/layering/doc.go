// Package layering holds the test of the import rules that Hilbert's
// package docs state (layering_test.go): each rule is quoted from the
// package's doc comment and checked against `go list -deps`. It has no
// code of its own and nothing imports it.
package layering
