package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// docPages are the Markdown files whose commands and links the tests below
// check: the README and the guide's pages under docs/ (the results'
// READMEs under docs/results too).
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"../../../README.md"}
	for _, pattern := range []string{"../../../docs/*.md", "../../../docs/results/*/README.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	if len(pages) < 10 {
		t.Fatalf("only %d doc pages found: %v", len(pages), pages)
	}
	return pages
}

// docCommand is one hilbert command line from a sh code block: where it
// is and its arguments after the program.
type docCommand struct {
	where string // file:line of the command's first line
	args  []string
}

// shCommands returns the hilbert command lines of the sh code blocks of
// Markdown text md (named file in the positions): `hilbert ...`,
// `./hilbert ...`, `mpirun ... ./hilbert ...`, `go run ./cmd/hilbert ...`
// and `go run ./examples/mymodel ...` (a program whose commands are
// cli.Main's). Lines continued with a backslash are joined; comments are
// dropped.
func shCommands(file, md string) ([]docCommand, error) {
	var cmds []docCommand
	inSh, joined, start := false, "", 0
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if !inSh {
			inSh = trimmed == "```sh" || trimmed == "```bash"
			continue
		}
		if strings.HasPrefix(trimmed, "```") {
			if joined != "" {
				return nil, fmt.Errorf("%s:%d: a continued line ends the code block", file, start)
			}
			inSh = false
			continue
		}
		if joined == "" {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, `\`) {
			joined += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		joined += trimmed
		words, err := shellWords(joined)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, start, err)
		}
		joined = ""
		for _, simple := range splitCommands(words) {
			if args, ok := hilbertArgs(simple); ok {
				cmds = append(cmds, docCommand{fmt.Sprintf("%s:%d", file, start), args})
			}
		}
	}
	if inSh {
		return nil, fmt.Errorf("%s: a sh code block is not closed", file)
	}
	return cmds, nil
}

// shellWords splits a command line as sh does for words: white space
// separates, single and double quotes group, and a # that begins a word
// starts a comment. Separators (|, &&, ;) come back as words of their own
// when written apart from their neighbours, as the docs write them.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words, nil
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c quote", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// splitCommands splits words at the shell's command separators.
func splitCommands(words []string) [][]string {
	var out [][]string
	var cur []string
	for _, w := range words {
		switch w {
		case "|", "||", "&&", ";", "&":
			out = append(out, cur)
			cur = nil
		default:
			cur = append(cur, w)
		}
	}
	return append(out, cur)
}

// hilbertArgs returns the arguments after the hilbert program in a simple
// command, and whether it runs hilbert at all.
func hilbertArgs(words []string) ([]string, bool) {
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
		words = words[1:] // environment assignments
	}
	if len(words) == 0 {
		return nil, false
	}
	switch words[0] {
	case "hilbert", "./hilbert":
		return words[1:], true
	case "go":
		if len(words) >= 3 && words[1] == "run" && (words[2] == "./cmd/hilbert" || words[2] == "./examples/mymodel") {
			return words[3:], true
		}
	case "mpirun":
		for i, w := range words {
			if w == "hilbert" || w == "./hilbert" {
				return words[i+1:], true
			}
		}
	}
	return nil, false
}

// helpFlags returns the flags that `hilbert args... -h` lists, read from
// the flag package's usage lines ("  -name type").
func helpFlags(t *testing.T, args []string) (map[string]bool, error) {
	t.Helper()
	var out bytes.Buffer
	if code := Run(append(append([]string{}, args...), "-h"), &out, &out); code != 0 {
		return nil, fmt.Errorf("hilbert %s -h: exit status %d: %s", strings.Join(args, " "), code, out.String())
	}
	flags := map[string]bool{"h": true, "help": true}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([A-Za-z0-9][A-Za-z0-9_.-]*)`).FindAllStringSubmatch(out.String(), -1) {
		flags[m[1]] = true
	}
	return flags, nil
}

// flagWord matches a word that is a flag: -name, --name, -name=value.
var flagWord = regexp.MustCompile(`^--?([A-Za-z][A-Za-z0-9_.-]*)(=.*)?$`)

// checkDocCommand checks one command line against the CLI: its
// subcommand (and bench target) exists and every flag it passes is one of
// that subcommand's. flagsOf caches helpFlags by subcommand.
func checkDocCommand(t *testing.T, c docCommand, flagsOf map[string]map[string]bool) error {
	t.Helper()
	sub, rest := []string{defaultSubcommand}, c.args
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		if _, ok := subcommands[rest[0]]; !ok {
			return fmt.Errorf("%s: hilbert has no subcommand %q", c.where, rest[0])
		}
		sub, rest = []string{rest[0]}, rest[1:]
		if sub[0] == "bench" {
			if len(rest) == 0 || benchTargets[rest[0]].run == nil {
				return fmt.Errorf("%s: hilbert bench needs a target (%s): %q", c.where, strings.Join(benchTargetNames(), ", "), c.args)
			}
			sub, rest = append(sub, rest[0]), rest[1:]
		}
	}
	key := strings.Join(sub, " ")
	flags, ok := flagsOf[key]
	if !ok {
		var err error
		if flags, err = helpFlags(t, sub); err != nil {
			return fmt.Errorf("%s: %v", c.where, err)
		}
		flagsOf[key] = flags
	}
	var unknown []string
	for _, w := range rest {
		if w == "--" {
			break
		}
		if m := flagWord.FindStringSubmatch(w); m != nil && !flags[m[1]] {
			unknown = append(unknown, "-"+m[1])
		}
	}
	if len(unknown) > 0 {
		names := make([]string, 0, len(flags))
		for f := range flags {
			names = append(names, f)
		}
		sort.Strings(names)
		return fmt.Errorf("%s: hilbert %s has no flag %s (its flags: %s)", c.where, key, strings.Join(unknown, ", "), strings.Join(names, " "))
	}
	return nil
}

// Every hilbert command in the docs' sh blocks names a subcommand that
// exists and passes only flags that subcommand has, so that it runs as
// written (the commands themselves train for minutes: only their command
// lines are checked here; the short ones run in the tests of the features
// they show).
func TestDocsCommandsUseRealFlags(t *testing.T) {
	flagsOf := map[string]map[string]bool{}
	n := 0
	for _, page := range docPages(t) {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("../../..", page)
		cmds, err := shCommands(name, string(md))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, c := range cmds {
			n++
			if err := checkDocCommand(t, c, flagsOf); err != nil {
				t.Error(err)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d hilbert commands found in the docs: the extraction is broken", n)
	}
}

// The extraction and the check fail on what they must: an unknown
// subcommand, an unknown flag, a bench without a target, and they find
// commands behind env assignments, mpirun and continued lines.
func TestDocsCommandCheckCatchesMistakes(t *testing.T) {
	md := "text\n```sh\n" +
		"go run ./cmd/hilbert train -name a -steps 3 # -nosuch in a comment\n" +
		"HILBERT_GEMM=go ./hilbert sample -run runs/a -prompt \"-x y\" -tokens 3\n" +
		"mpirun -np 2 ./hilbert train -name b \\\n  -nosuchflag 3\n" +
		"go run ./cmd/hilbert trian -steps 3\n" +
		"hilbert bench -preset cpu-128\n" +
		"go build -o hilbert ./cmd/hilbert && hilbert -resume --overwrite\n" +
		"```\n" +
		"```\nhilbert notsh -nosuch\n```\n"
	cmds, err := shCommands("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"x.md:3", "x.md:4", "x.md:5", "x.md:7", "x.md:8", "x.md:9"}
	var got []string
	for _, c := range cmds {
		got = append(got, c.where)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("commands at %v, want %v", got, want)
	}
	flagsOf := map[string]map[string]bool{}
	for i, c := range []struct{ wantErr string }{
		{""},
		{""},
		{"x.md:5: hilbert train has no flag -nosuchflag"},
		{`x.md:7: hilbert has no subcommand "trian"`},
		{"x.md:8: hilbert bench needs a target"},
		{""},
	} {
		err := checkDocCommand(t, cmds[i], flagsOf)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", cmds[i].where, err)
		case c.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), c.wantErr)):
			t.Errorf("%s: got %v, want an error starting %q", cmds[i].where, err, c.wantErr)
		}
	}
	if _, err := shCommands("y.md", "```sh\nhilbert train \\\n```\n"); err == nil {
		t.Error("a continued last line was accepted")
	}
	if _, err := shCommands("y.md", "```sh\nhilbert train -prompt 'a\n```\n"); err == nil {
		t.Error("an unclosed quote was accepted")
	}
}

// mdLink matches a Markdown link or image target: ](target) or
// ](target#anchor).
var mdLink = regexp.MustCompile(`\]\(([^)\s#]*)(#[^)\s]*)?\)`)

// headingSlugs returns the anchors GitHub gives the headings of md:
// lowercased, everything but letters, digits, spaces, - and _ dropped,
// spaces made -.
func headingSlugs(md string) map[string]bool {
	slugs := map[string]bool{}
	inCode := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range title {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		slugs[b.String()] = true
	}
	return slugs
}

// brokenLinks returns the relative links of Markdown file page (text md)
// whose file does not exist, or whose #anchor is no heading of the
// Markdown file it names; code blocks and code spans are skipped.
func brokenLinks(page, md string) []string {
	var broken []string
	inCode := false
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		line = regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "``")
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target, anchor := m[1], strings.TrimPrefix(m[2], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			where := fmt.Sprintf("%s:%d: %s", strings.TrimPrefix(page, "../../../"), i+1, m[0][1:])
			file := page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
			}
			data, err := os.ReadFile(file)
			if err != nil {
				if st, serr := os.Stat(file); serr == nil && st.IsDir() && anchor == "" {
					continue // a folder
				}
				broken = append(broken, where+": no such file")
				continue
			}
			if anchor != "" && strings.HasSuffix(file, ".md") && !headingSlugs(string(data))[anchor] {
				broken = append(broken, where+": no such heading")
			}
		}
	}
	return broken
}

// The docs' relative links and their anchors lead somewhere: a page
// moved into docs/ links to ../scripts, images/..., another page's heading.
func TestDocsLinksResolve(t *testing.T) {
	for _, page := range docPages(t) {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range brokenLinks(page, string(md)) {
			t.Error(b)
		}
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "p.md")
	md := "# A page\n## Pretrained models (`models/hf`)\n[ok](#pretrained-models-modelshf) [ok](p.md) [ok](https://x.org/y)\n" +
		"[bad](#no-such) [bad](missing.md) [bad](p.md#nope)\n```\n[code](nowhere.md)\n```\n`[span](nowhere.md)`\n"
	if err := os.WriteFile(page, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := brokenLinks(page, md); len(got) != 3 {
		t.Errorf("broken links in the test page: %q, want the 3 marked bad", got)
	}
}

// The short commands of the docs run as written, from the repository's
// root: sample and eval of the Hugging Face fixtures in the repository
// (a fraction of a second each), and what they print is what the page
// says they print.
func TestDocsShortCommandsRun(t *testing.T) {
	type found struct {
		docCommand
		page string
	}
	var short []found
	for _, page := range docPages(t) {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("../../..", page)
		cmds, err := shCommands(name, string(md))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			if len(c.args) < 3 || (c.args[0] != "sample" && c.args[0] != "eval") || c.args[1] != "-hf" ||
				!strings.HasPrefix(c.args[2], "models/hf/testdata/") {
				continue
			}
			short = append(short, found{c, string(md)})
		}
	}
	if len(short) < 2 {
		t.Fatalf("found %d short commands (sample -hf, eval -hf of the fixtures), want at least 2", len(short))
	}
	t.Chdir("../../..")
	ids := regexp.MustCompile(`^(\d+,){4}\d+`)
	loss := regexp.MustCompile(`val loss [0-9.]+ over \d+ tokens`)
	for _, c := range short {
		var stdout, stderr bytes.Buffer
		if code := Run(c.args, &stdout, &stderr); code != 0 {
			t.Errorf("%s: hilbert %s: exit status %d: %s", c.where, strings.Join(c.args, " "), code, stderr.String())
			continue
		}
		var said string
		if c.args[0] == "sample" {
			said = ids.FindString(stdout.String())
		} else {
			said = loss.FindString(stdout.String())
		}
		if said == "" || !strings.Contains(c.page, said) {
			t.Errorf("%s: hilbert %s printed %q; the page does not say %q", c.where, strings.Join(c.args, " "), stdout.String(), said)
		}
	}
}
