package layering

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hilbert-ml/hilbert/"

// rule is one package doc's import rule: doc is the sentence (a fragment
// of it) in the package's doc comment, allow the Hilbert packages it may
// depend on (transitively, non-test code), or deny those it must not,
// where a name ending in "/" denies the whole tree.
type rule struct {
	pkg   string
	doc   string
	allow []string
	deny  []string
}

var rules = []rule{
	{pkg: "device", doc: "must not depend on any other Hilbert package", allow: []string{}},
	{pkg: "device/compose", doc: "depends only on package device", allow: []string{"device"}},
	{pkg: "device/cpu", doc: "depends only on device/", allow: []string{"device"}},
	{pkg: "device/cuda", doc: "depends only on device and device/compose", allow: []string{"device", "device/compose"}},
	{pkg: "tensor", doc: "depends only on device/", allow: []string{"device"}},
	{pkg: "autograd", doc: "depends on device/ (and device/compose) and tensor/ only", allow: []string{"device", "device/compose", "tensor"}},
	{pkg: "safetensors", doc: "must not import any other Hilbert", allow: []string{}},
	{pkg: "nn", doc: "must not import models, optim, data or anything above them",
		allow: []string{"device", "device/compose", "tensor", "autograd", "safetensors"}},
	{pkg: "models", doc: "must not import optim, data or the trainer",
		allow: []string{"device", "device/compose", "tensor", "autograd", "safetensors", "nn"}},
	{pkg: "models/registry", doc: "must not import train, data or cmd", deny: []string{"train/", "data/", "cmd/", "device/cpu/", "device/cuda/"}},
	{pkg: "models/hf", doc: "must not import train, data or cmd", deny: []string{"train/", "data/", "cmd/", "device/cpu/", "device/cuda/"}},
	{pkg: "optim", doc: "depends only on device/ (and device/compose) and tensor/", allow: []string{"device", "device/compose", "tensor"}},
	{pkg: "optim/geometry", doc: "depends only on device and device/compose", allow: []string{"device", "device/compose"}},
	{pkg: "dist", doc: "depends on device, device/compose and tensor, never on a", allow: []string{"device", "device/compose", "tensor"}},
	{pkg: "data", doc: "depends only on the tokenizer", allow: []string{"tokenizer"}},
	{pkg: "tokenizer", doc: "knows nothing of tensors or devices and must not import them",
		deny: []string{"device/", "tensor/", "autograd/", "nn/", "models/", "optim/", "train/"}},
	// train "sits on top" and reaches backends only through device.Describe.
	{pkg: "train", doc: "nothing depends on it but commands, examples and the run dashboard",
		deny: []string{"device/cpu/", "device/cuda/", "cmd/"}},
	{pkg: "view", doc: "imports train for its record and lock types, and never cmd",
		deny: []string{"device/cpu/", "device/cuda/", "cmd/"}},
	{pkg: "study/oraclestudy", doc: "is handed its device, and never imports a concrete backend or cmd",
		deny: []string{"device/cpu/", "device/cuda/", "cmd/"}},
}

// listed is what `go list -deps -json` says of a package.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
	Standard   bool
}

// goList runs `go list` over the module and returns its packages by path.
func goList(t *testing.T) map[string]listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json", module+"...")
	cmd.Dir = filepath.Join("..", "..")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(&out)
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	return pkgs
}

// hilbertDeps returns the module's packages among deps, without the prefix.
func hilbertDeps(deps []string) []string {
	var out []string
	for _, d := range deps {
		if rest, ok := strings.CutPrefix(d, module); ok {
			out = append(out, rest)
		}
	}
	return out
}

// docComment returns the package doc comment's text (the comment above
// the package clause in any of its files).
func docComment(t *testing.T, p listed) string {
	t.Helper()
	var all strings.Builder
	for _, f := range p.GoFiles {
		b, err := os.ReadFile(filepath.Join(p.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			if !strings.HasPrefix(l, "package ") {
				continue
			}
			var c []string
			for j := i - 1; j >= 0 && strings.HasPrefix(lines[j], "//"); j-- {
				c = append([]string{strings.TrimSpace(strings.TrimPrefix(lines[j], "//"))}, c...)
			}
			all.WriteString(strings.Join(c, " "))
			break
		}
	}
	return all.String()
}

// internalLeaves returns the internal/ packages that depend on no other
// Hilbert package (helpers such as internal/regfile, standard library
// only): they belong to no layer, so any package may use them.
func internalLeaves(pkgs map[string]listed) map[string]bool {
	leaves := map[string]bool{}
	for path, p := range pkgs {
		if strings.HasPrefix(path, "internal/") && len(hilbertDeps(p.Deps)) == 0 {
			leaves[path] = true
		}
	}
	return leaves
}

func denied(dep string, deny []string) bool {
	for _, d := range deny {
		if dep == strings.TrimSuffix(d, "/") || (strings.HasSuffix(d, "/") && strings.HasPrefix(dep, d)) {
			return true
		}
	}
	return false
}

// TestImportRules checks each package doc's import rule against the
// packages it depends on, and that the rule is still in its doc.
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	pkgs := goList(t)
	leaves := internalLeaves(pkgs)
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			p, ok := pkgs[r.pkg]
			if !ok {
				t.Fatalf("go list does not know %s", r.pkg)
			}
			if doc := docComment(t, p); !strings.Contains(doc, r.doc) {
				t.Errorf("%s's doc comment no longer says %q: update the rule here with the doc", r.pkg, r.doc)
			}
			for _, dep := range hilbertDeps(p.Deps) {
				if leaves[dep] {
					continue
				}
				if r.allow != nil && !slices.Contains(r.allow, dep) {
					t.Errorf("%s depends on %s; its doc says it %s (allowed: %v)", r.pkg, dep, r.doc, r.allow)
				}
				if denied(dep, r.deny) {
					t.Errorf("%s depends on %s; its doc says it %s", r.pkg, dep, r.doc)
				}
			}
		})
	}
	// Nothing but commands, examples, scripts, studies and the dashboard imports train.
	for path, p := range pkgs {
		if strings.HasPrefix(path, "cmd/") || strings.HasPrefix(path, "examples/") || strings.HasPrefix(path, "scripts/") || strings.HasPrefix(path, "study/") || path == "train" || path == "view" {
			continue
		}
		if slices.Contains(hilbertDeps(p.Imports), "train") {
			t.Errorf("%s imports train; train's doc says nothing depends on it but commands, examples, studies and the run dashboard", path)
		}
	}
}
