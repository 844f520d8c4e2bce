package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// module is the import path `go tool covdata textfmt` names files by.
const module = "github.com/twinloop/twinloop/"

// block is one coverage block: a file (relative to the repository) and the
// line and column it starts at, which is all that places it in a function.
type block struct {
	file      string
	line, col int
}

// counts reads a run's counters, for the blocks of files under backend/,
// with `go tool covdata textfmt`.
func counts(covdir string) (map[block]int64, error) {
	out := filepath.Join(covdir, "profile.txt")
	cmd := exec.Command("go", "tool", "covdata", "textfmt", "-i="+covdir, "-o="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go tool covdata textfmt: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseProfile(f)
}

// parseProfile reads a profile in the textfmt (`go test -coverprofile`)
// form, "mode: atomic" then one line per block,
//
//	github.com/twinloop/twinloop/backend/epoll/loop_linux.go:40.31,40.49 1 5
//
// (file:start,end statements count), keeping the blocks under backend/.
func parseProfile(r io.Reader) (map[block]int64, error) {
	m := map[block]int64{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 && strings.HasPrefix(line, "mode:") || line == "" {
			continue
		}
		colon := strings.LastIndexByte(line, ':')
		fields := strings.Fields(line[colon+1:])
		if colon < 0 || len(fields) != 3 {
			return nil, fmt.Errorf("profile line %d: %q", n, line)
		}
		file, ok := strings.CutPrefix(line[:colon], module)
		if !ok || !strings.HasPrefix(file, "backend/") {
			continue
		}
		start, _, _ := strings.Cut(fields[0], ",")
		l, c, _ := strings.Cut(start, ".")
		b := block{file: file}
		var err1, err2, err3 error
		b.line, err1 = strconv.Atoi(l)
		b.col, err2 = strconv.Atoi(c)
		cnt, err3 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("profile line %d: %q", n, line)
		}
		m[b] += cnt
	}
	return m, sc.Err()
}

// fn is a function as the doc.go lists name it: its file relative to
// backend/ and "Type.method" or "function". A closure is its enclosing
// function's, as `go tool cover -func` counts it.
type fn struct {
	file, name string
	pos        int // line of its declaration, to list a file's functions in source order
}

// funcs places blocks in functions by parsing the sources under root.
type funcs struct {
	root  string
	decls map[string][]decl // by file relative to the repository
}

type decl struct {
	name       string
	start, end token.Position
}

func newFuncs(root string) *funcs { return &funcs{root: root, decls: map[string][]decl{}} }

// of returns the function block b is in.
func (fs *funcs) of(b block) (fn, error) {
	ds, ok := fs.decls[b.file]
	if !ok {
		var err error
		if ds, err = parseDecls(filepath.Join(fs.root, b.file)); err != nil {
			return fn{}, err
		}
		fs.decls[b.file] = ds
	}
	for _, d := range ds {
		if before(d.start, b.line, b.col) && !before(d.end, b.line, b.col) {
			return fn{file: strings.TrimPrefix(b.file, "backend/"), name: d.name, pos: d.start.Line}, nil
		}
	}
	return fn{}, fmt.Errorf("%s:%d.%d: a block in no function (do the sources match the binary?)", b.file, b.line, b.col)
}

// before says whether p is at or before line.col.
func before(p token.Position, line, col int) bool {
	return p.Line < line || p.Line == line && p.Column <= col
}

func parseDecls(path string) ([]decl, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var ds []decl
	add := func(name string, n ast.Node) {
		ds = append(ds, decl{name: name, start: fset.Position(n.Pos()), end: fset.Position(n.End())})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Body != nil {
				add(funcName(d), d)
			}
		case *ast.GenDecl:
			// A function literal in a variable's value (a sync.Pool's New)
			// counts as the variable's.
			for _, s := range d.Specs {
				if vs, ok := s.(*ast.ValueSpec); ok && hasFuncLit(vs) {
					add(vs.Names[0].Name, vs)
				}
			}
		}
	}
	return ds, nil
}

func hasFuncLit(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		_, ok := n.(*ast.FuncLit)
		found = found || ok
		return !found
	})
	return found
}

// funcName is "Type.method" for a method (whatever its receiver's pointer
// or type parameters) and the name for a function.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// path is the functions one kind of request ran: those with a block that
// ran at least 3n/4 more times in the run of 2n requests than in the run
// of n. A function every request runs ran n more times, or a multiple; one
// that runs at start and stop, or once a second (the runs span the same
// seconds: serve), a few times more or less, as the order in which the
// listeners close meets the check that reads them (listen.Shared). Those
// are in rare, with how many more times they ran.
type path struct {
	fns  []fn
	rare map[fn]int64
}

func measure(fs *funcs, once, twice map[block]int64, n int) (path, error) {
	most := map[fn]int64{}
	for b, c2 := range twice {
		d := c2 - once[b]
		if d <= 0 {
			continue
		}
		f, err := fs.of(b)
		if err != nil {
			return path{}, err
		}
		most[f] = max(most[f], d)
	}
	p := path{rare: map[fn]int64{}}
	for f, d := range most {
		if 4*d >= 3*int64(n) {
			p.fns = append(p.fns, f)
		} else {
			p.rare[f] = d
		}
	}
	sortFns(p.fns)
	return p, nil
}

// sortFns orders by file, then by place in the file.
func sortFns(fns []fn) {
	sort.Slice(fns, func(i, j int) bool {
		if fns[i].file != fns[j].file {
			return fns[i].file < fns[j].file
		}
		return fns[i].pos < fns[j].pos
	})
}
