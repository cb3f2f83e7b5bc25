// Command funclen prints the non-test Go functions longer than -max lines
// and the non-test Go files longer than -file-max lines under the given
// folders (default "."), longest first, then their counts, so the
// consolidation issue's figures can be measured again:
//
//	go run ./scripts/funclen -max 80 -file-max 500 .
//
// A function's length runs from its func keyword to its closing brace
// (its doc comment not counted). Generated files (a "Code generated ...
// DO NOT EDIT." line) and vendored or testdata folders are skipped. A
// function whose doc comment holds "funclen:" gives the reason it stays
// long; it is listed with that reason but not counted.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// entry is one long function or file.
type entry struct {
	where  string // file:line
	name   string
	lines  int
	reason string // from a "funclen:" doc comment line
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

func main() {
	maxFunc := flag.Int("max", 80, "list functions longer than this many lines")
	maxFile := flag.Int("file-max", 500, "list files longer than this many lines")
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = []string{"."}
	}
	var funcs, files []entry
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); path != root && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			fn, fl, err := measure(path, *maxFunc, *maxFile)
			funcs = append(funcs, fn...)
			files = append(files, fl...)
			return err
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(1)
		}
	}
	counted := report("function", *maxFunc, funcs)
	report("file", *maxFile, files)
	fmt.Printf("%d functions over %d lines without a reason (%d with one), %d files over %d lines\n",
		counted, *maxFunc, len(funcs)-counted, len(files), *maxFile)
}

// measure returns path's functions over maxFunc lines and, when the file
// is over maxFile lines, the file itself.
func measure(path string, maxFunc, maxFile int) (funcs, files []entry, err error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if generated.Match(src) {
		return nil, nil, nil
	}
	if n := lineCount(src); n > maxFile {
		files = append(files, entry{where: path, lines: n})
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		if n := end.Line - start.Line + 1; n > maxFunc {
			funcs = append(funcs, entry{where: fmt.Sprintf("%s:%d", path, start.Line), name: funcName(fd), lines: n, reason: reason(fd.Doc)})
		}
	}
	return funcs, files, nil
}

// lineCount counts src's lines as wc -l does.
func lineCount(src []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		n++
	}
	return n
}

// funcName is fd's name with its receiver type, as in (*T).M.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return fmt.Sprintf("(%s%s).%s", star, id.Name, fd.Name.Name)
	}
	return fd.Name.Name
}

// reason returns the text after "funclen:" in doc, or "".
func reason(doc *ast.CommentGroup) string {
	if doc == nil {
		return ""
	}
	text := doc.Text()
	i := strings.Index(text, "funclen:")
	if i < 0 {
		return ""
	}
	return strings.Join(strings.Fields(text[i+len("funclen:"):]), " ")
}

// report prints entries longest first and returns how many have no reason.
func report(kind string, limit int, es []entry) int {
	sort.Slice(es, func(i, j int) bool {
		if es[i].lines != es[j].lines {
			return es[i].lines > es[j].lines
		}
		return es[i].where < es[j].where
	})
	fmt.Printf("%ss over %d lines:\n", kind, limit)
	counted := 0
	for _, e := range es {
		line := fmt.Sprintf("%5d  %s", e.lines, e.where)
		if e.name != "" {
			line += "  " + e.name
		}
		if e.reason != "" {
			line += "  (kept: " + e.reason + ")"
		} else {
			counted++
		}
		fmt.Println(line)
	}
	return counted
}
