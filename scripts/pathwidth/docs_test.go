package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const docHead = `// Package epoll is a backend.
//
// # Life of a request
//
// A GET: Run → drive → write.
//
`

func TestParseDocLists(t *testing.T) {
	doc := docHead + `//	every:
//	  loop_linux.go: loop.Run, loop.drive,
//	    loop.write
//	  internal/loops/sys_linux.go: Sys.Read
//	small: nothing of its own
//	large:
//	  internal/loops/filebody_linux.go: Bodies.WriteFile
//	miss:
//	  loop_linux.go: loop.probe
//
// # Another section
//
//	not: a list
package epoll
`
	got, err := parseDocLists(strings.NewReader(doc), "epoll")
	require.NoError(t, err)
	assert.Equal(t, docLists{
		"every": {"epoll/loop_linux.go: loop.Run", "epoll/loop_linux.go: loop.drive", "epoll/loop_linux.go: loop.write",
			"internal/loops/sys_linux.go: Sys.Read"},
		"small": nil,
		"large": {"internal/loops/filebody_linux.go: Bodies.WriteFile"},
		"miss":  {"epoll/loop_linux.go: loop.probe"},
	}, got)
}

func TestParseDocListsErrors(t *testing.T) {
	labels := "//\tsmall:\n//\tlarge:\n//\tmiss:\n"
	for _, tc := range []struct {
		name, list, want string
	}{
		{name: "no list", list: "// Only prose.\n", want: "no list"},
		{name: "file before a label", list: "//\t  loop_linux.go: loop.Run\n", want: "before a kind's label"},
		{name: "unknown kind", list: "//\tevery:\n//\thit:\n" + labels, want: `"hit" is no kind`},
		{name: "label twice", list: "//\tevery:\n//\tevery:\n" + labels, want: "every: listed twice"},
		{name: "a label missing", list: "//\tevery:\n//\tsmall:\n//\tlarge:\n", want: `no "miss" label`},
		{name: "a function twice", list: "//\tevery:\n//\t  a.go: f\n//\tsmall:\n//\t  a.go: f\n//\tlarge:\n//\tmiss:\n", want: "epoll/a.go: f: listed twice (every, small)"},
		{name: "a function twice in a kind", list: "//\tevery:\n//\tsmall:\n//\t  a.go: f, g\n//\t  a.go: f\n//\tlarge:\n//\tmiss:\n", want: "epoll/a.go: f: listed twice (small, small)"},
		{name: "a line of neither", list: "//\tevery:\n//\t  Sys.Read\n" + labels, want: "neither a kind's label nor a file's list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDocLists(strings.NewReader(docHead+tc.list+"package epoll\n"), "epoll")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCompare(t *testing.T) {
	doc := docLists{
		"every": {"epoll/loop_linux.go: loop.Run", "epoll/loop_linux.go: loop.drive"},
		"small": nil,
		"large": {"internal/loops/filebody_linux.go: Bodies.WriteFile"},
		"miss":  {"epoll/loop_linux.go: loop.gone"},
	}
	run := func(names ...string) path {
		var p path
		for _, n := range names {
			file, name, _ := strings.Cut(n, ": ")
			p.fns = append(p.fns, fn{file: file, name: name})
		}
		return p
	}
	measured := paths{
		"small": run("epoll/loop_linux.go: loop.Run", "epoll/loop_linux.go: loop.drive"),
		"large": run("epoll/loop_linux.go: loop.Run", "epoll/loop_linux.go: loop.drive", "internal/loops/filebody_linux.go: Bodies.WriteFile"),
		"miss":  run("epoll/loop_linux.go: loop.Run", "epoll/loop_linux.go: loop.new", "internal/loops/sys_linux.go: Sys.Read"),
	}
	assert.Equal(t, []string{
		"miss: listed, but did not run: epoll/loop_linux.go: loop.drive; epoll/loop_linux.go: loop.gone",
		"miss: ran, but not listed: epoll/loop_linux.go: loop.new; internal/loops/sys_linux.go: Sys.Read",
	}, compare(doc, measured))
	measured["miss"] = run("epoll/loop_linux.go: loop.Run", "epoll/loop_linux.go: loop.drive", "epoll/loop_linux.go: loop.gone")
	assert.Empty(t, compare(doc, measured))
}

// What the tool prints is what a doc.go carries: pasted under "//", it
// reads back as the same paths, with no difference.
func TestWriteListsReadsBack(t *testing.T) {
	f := func(file, name string, pos int) fn { return fn{file: file, name: name, pos: pos} }
	run, drive := f("epoll/loop_linux.go", "loop.Run", 10), f("epoll/loop_linux.go", "loop.drive", 20)
	read := f("internal/loops/sys_linux.go", "Sys.Read", 5)
	measured := paths{
		"small": {fns: []fn{run, drive, read}},
		"large": {fns: []fn{run, drive, read, f("internal/loops/filebody_linux.go", "Bodies.WriteFile", 7),
			f("internal/loops/filebody_linux.go", "Bodies.Sendfile", 9), f("internal/loops/filebody_linux.go", "Bodies.resident", 11),
			f("internal/loops/filebody_linux.go", "Body.NewPart", 12)}},
		"miss": {fns: []fn{run, drive}},
	}
	var b bytes.Buffer
	writeLists(&b, "epoll", measured)
	assert.Equal(t, `	every:
	  loop_linux.go: loop.Run, loop.drive
	small:
	  internal/loops/sys_linux.go: Sys.Read
	large:
	  internal/loops/filebody_linux.go: Bodies.WriteFile, Bodies.Sendfile,
	    Bodies.resident, Body.NewPart
	  internal/loops/sys_linux.go: Sys.Read
	miss: nothing of its own
`, b.String())
	doc := docHead + "//" + strings.ReplaceAll(strings.TrimSuffix(b.String(), "\n"), "\n", "\n//") + "\npackage epoll\n"
	lists, err := parseDocLists(strings.NewReader(doc), "epoll")
	require.NoError(t, err)
	assert.Empty(t, compare(lists, measured))
}
