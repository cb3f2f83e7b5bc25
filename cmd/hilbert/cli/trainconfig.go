package cli

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hilbert-ml/hilbert/train"
)

// Flag values that check their range when set, so that a bad value from the
// command line or from a config file is an error naming the flag and the
// value (the flag package adds `invalid value "V" for flag -NAME: `).

// intValue is an int flag of at least min.
type intValue struct {
	p    *int
	min  int
	want string
}

func (v intValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v intValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, strconv.IntSize)
	if err != nil {
		return errors.New("want an integer")
	}
	if int(n) < v.min {
		return errors.New(v.want)
	}
	*v.p = int(n)
	return nil
}

func intFlag(fs *flag.FlagSet, p *int, name string, value, min int, want, usage string) {
	*p = value
	fs.Var(intValue{p, min, want}, name, usage)
}

// positive: at least 1; nonNegative: at least 0.
// (The `int` in the usage names the value in -h's listing.)
func positive(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	intFlag(fs, p, name, value, 1, "want a positive integer", usage+"; an `int` >= 1")
}

func nonNegative(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	intFlag(fs, p, name, value, 0, "want an integer >= 0", usage+"; an `int` >= 0")
}

// floatValue is a finite float64 flag, >= 0 (or > 0 when strict).
type floatValue struct {
	p      *float64
	strict bool
}

func (v floatValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

func (v floatValue) Set(s string) error {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	switch {
	case err != nil || math.IsNaN(x) || math.IsInf(x, 0):
		return errors.New("want a finite number")
	case v.strict && x <= 0:
		return errors.New("want a number > 0")
	case x < 0:
		return errors.New("want a number >= 0")
	}
	*v.p = x
	return nil
}

func floatFlag(fs *flag.FlagSet, p *float64, name string, value float64, strict bool, usage string) {
	*p = value
	if strict {
		usage += "; a finite `float` > 0"
	} else {
		usage += "; a finite `float` >= 0"
	}
	fs.Var(floatValue{p, strict}, name, usage)
}

// warmupValue is -warmup: N updates, 0 for none; unset it leaves the
// library's default (floor(0.1 T)).
type warmupValue struct{ p *int }

func (v warmupValue) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	return strconv.Itoa(max(*v.p, 0))
}

func (v warmupValue) Set(s string) error {
	return setCount(v.p, s, train.NoWarmup, "want a number of updates >= 0 (0: no warmup)")
}

// setCount sets *p to s, a count >= 0, with 0 stored as zero (the
// library's value for it); want is the error for anything else.
func setCount(p *int, s string, zero int, want string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, strconv.IntSize)
	if err != nil || n < 0 {
		return errors.New(want)
	}
	*p = int(n)
	if n == 0 {
		*p = zero
	}
	return nil
}

// positiveDuration is a duration flag > 0 (checked alike on every rank of
// a data-parallel run, and in a single process).
type positiveDuration struct{ p *time.Duration }

func (v positiveDuration) String() string {
	if v.p == nil {
		return "0s"
	}
	return v.p.String()
}

func (v positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return errors.New("want a duration > 0, such as 90s or 5m")
	}
	*v.p = d
	return nil
}

// keepValue is -keep-checkpoints: the newest N checkpoints, 0 for all;
// unset it leaves the library's default (train.DefaultKeepCheckpoints).
type keepValue struct{ p *int }

func (v keepValue) String() string {
	switch {
	case v.p == nil:
		return "0"
	case *v.p < 0:
		return "0"
	case *v.p == 0:
		return strconv.Itoa(train.DefaultKeepCheckpoints)
	}
	return strconv.Itoa(*v.p)
}

func (v keepValue) Set(s string) error {
	return setCount(v.p, s, train.KeepAllCheckpoints, "want a number of checkpoints >= 0 (0: all)")
}

// listValue is a comma-separated list flag; a config file may give it as
// a YAML list instead.
type listValue struct{ p *[]string }

func (v listValue) String() string {
	if v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

func (v listValue) Set(s string) error {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return errors.New("want one or more comma-separated files")
	}
	*v.p = out
	return nil
}

// Config files. A config file sets flags: each top-level key is a flag's
// name with _ for -, and its value is what the flag would be given, so a
// file means exactly what its command line would. The list flags (text,
// train) also take YAML lists, and a "model" section sets the model's
// fields one by one. Flags on the command line win over the file, and the
// file over the defaults, which are the CLI's whatever the file holds.

// commandLineOnly are flags a config file may not set.
var commandLineOnly = []string{"config", "resume", "overwrite", "break-lock"}

// renamedKeys are keys of earlier config files, with the key to use now.
var renamedKeys = map[string]string{"runs_dir": "runs", "val_shard": "val", "clip_norm": "clip", "train_shards": "train"}

// configEntry is one top-level key of a config file.
type configEntry struct {
	key    string
	line   int
	scalar string
	list   []string
	isList bool
}

// modelSection is a config file's model section: each field set (non-nil)
// replaces that field of the model.
type modelSection struct {
	Layers, Dim, HeadDim, MLPHidden, Vocab, Context *int
	RoPEBase, InitStd                               *float64
	keys                                            map[string]bool
}

// configFile is a parsed config file.
type configFile struct {
	path    string
	entries []configEntry
	model   *modelSection
}

// readConfigFile parses path: a YAML mapping of flag keys (an empty file is
// an empty mapping).
func readConfigFile(path string) (*configFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-config: %w", err)
	}
	return parseConfig(path, data)
}

// parseConfig parses a config file's contents (path names it in errors).
func parseConfig(path string, data []byte) (*configFile, error) {
	cf := &configFile{path: path}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return cf, nil // empty, or only comments
	}
	top := doc.Content[0]
	if a := findAlias(top); a != nil {
		return nil, fmt.Errorf("config %s line %d: *%s: YAML aliases are not read in a config file (one can expand without bound): write the value out", path, a.Line, a.Value)
	}
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config %s line %d: want a mapping of settings (key: value), got a %s", path, top.Line, kindName(top))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		key := k.Value
		if prev, dup := seen[key]; dup {
			return nil, fmt.Errorf("config %s line %d: %s is set twice (also on line %d)", path, k.Line, key, prev)
		}
		seen[key] = k.Line
		bad := func(format string, args ...any) error {
			return fmt.Errorf("config %s line %d: %s: %s", path, k.Line, key, fmt.Sprintf(format, args...))
		}
		if key == "model" && v.Kind == yaml.MappingNode { // else the -model flag
			m, err := parseModelSection(v, bad)
			if err != nil {
				return nil, err
			}
			cf.model = m
			continue
		}
		e := configEntry{key: key, line: k.Line}
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag == "!!null" {
				return nil, bad("no value")
			}
			e.scalar = v.Value
		case yaml.SequenceNode:
			e.isList = true
			for _, item := range v.Content {
				if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
					return nil, bad("want a list of file names")
				}
				e.list = append(e.list, item.Value)
			}
		default:
			return nil, bad("want a value, got a %s", kindName(v))
		}
		cf.entries = append(cf.entries, e)
	}
	return cf, nil
}

// findAlias returns the first alias node of the tree under n (aliases are
// not followed, so the walk is bounded by the file's size), or nil.
func findAlias(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		return n
	}
	for _, c := range n.Content {
		if a := findAlias(c); a != nil {
			return a
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "single value"
	}
	return "node"
}

// parseModelSection reads model: {layers, dim, head_dim, mlp_hidden, vocab,
// context, rope_base, init_std}.
func parseModelSection(n *yaml.Node, bad func(string, ...any) error) (*modelSection, error) {
	if n.Kind != yaml.MappingNode {
		return nil, bad("want a mapping of the model's fields (layers, dim, head_dim, mlp_hidden, vocab, context, rope_base, init_std)")
	}
	m := &modelSection{keys: map[string]bool{}}
	ints := map[string]**int{"layers": &m.Layers, "dim": &m.Dim, "head_dim": &m.HeadDim, "mlp_hidden": &m.MLPHidden, "vocab": &m.Vocab, "context": &m.Context}
	floats := map[string]**float64{"rope_base": &m.RoPEBase, "init_std": &m.InitStd}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		if m.keys[k] {
			return nil, bad("model.%s is set twice", k)
		}
		m.keys[k] = true
		if v.Kind != yaml.ScalarNode {
			return nil, bad("model.%s: want a number", k)
		}
		if p, ok := ints[k]; ok {
			x, err := strconv.ParseInt(v.Value, 0, strconv.IntSize)
			if err != nil || x < 1 {
				return nil, bad("model.%s = %q: want a positive integer", k, v.Value)
			}
			xi := int(x)
			*p = &xi
			continue
		}
		if p, ok := floats[k]; ok {
			x, err := strconv.ParseFloat(v.Value, 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) {
				return nil, bad("model.%s = %q: want a finite number > 0", k, v.Value)
			}
			*p = &x
			continue
		}
		return nil, bad("unknown model field %q (want layers, dim, head_dim, mlp_hidden, vocab, context, rope_base or init_std)", k)
	}
	return m, nil
}

// apply sets, through fs, every flag the file names that the command line
// did not (cmdSet); it returns the flags it set.
func (cf *configFile) apply(fs *flag.FlagSet, cmdSet map[string]bool) (map[string]bool, error) {
	set := map[string]bool{}
	for _, e := range cf.entries {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("config %s line %d: %s: %s", cf.path, e.line, e.key, fmt.Sprintf(format, args...))
		}
		name := strings.ReplaceAll(e.key, "_", "-")
		f := fs.Lookup(name)
		switch {
		case strings.Contains(e.key, "-") && f != nil:
			return nil, bad("config keys use _ for the flags' - (write %s)", strings.ReplaceAll(e.key, "-", "_"))
		case renamedKeys[e.key] != "":
			return nil, bad("unknown key; the flag is -%s, so the key is %s", renamedKeys[e.key], renamedKeys[e.key])
		case f == nil:
			return nil, bad("unknown key (the keys are the flag names with _ for -: see hilbert %s -h)", fs.Name())
		case slices.Contains(commandLineOnly, name):
			return nil, bad("-%s is for the command line only", name)
		}
		if cmdSet[name] {
			continue // the command line wins
		}
		if e.isList {
			lv, ok := f.Value.(listValue)
			if !ok {
				return nil, bad("want a single value, not a list")
			}
			if len(e.list) == 0 {
				return nil, bad("empty list")
			}
			*lv.p = e.list
		} else if err := fs.Set(name, e.scalar); err != nil {
			return nil, bad("%q: %v", e.scalar, err)
		}
		set[name] = true
	}
	return set, nil
}
