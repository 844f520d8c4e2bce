package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// A backend's doc.go carries its measured path as the one code block of
// its "# Life of a request" section: a label line per kind, and under it
// lines "file.go: function, Type.method, ...", a long one continued on the
// lines after it:
//
//	every:
//	  loop_linux.go: loop.Run, loop.drive, loop.watch, conn.write,
//	    conn.sendBytes
//	  internal/loops/sys_linux.go: Sys.Read, Sys.Write
//	small: nothing of its own
//	large:
//	  internal/loops/filebody_linux.go: Bodies.WriteFile, Bodies.Sendfile
//	miss:
//	  ...
//
// A file without a slash is in the doc.go's own package; one with a slash
// is under backend/. "every" lists what all the kinds run, and each kind's
// label what that kind adds (words after a label are a remark): the tool
// compares every kind's path with "every" and its own list together, kind
// by kind. Each label is there once; a function is listed once under
// "every", or once under each kind that runs it.
const everyLabel = "every"

// docLists is what a doc.go lists, by label: "file: name", each file
// relative to backend/.
type docLists map[string][]string

func readDocLists(path string) (docLists, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseDocLists(f, filepath.Base(filepath.Dir(path)))
}

// parseDocLists reads the lists of the doc comment in r, whose package is
// backend/pkg.
func parseDocLists(r io.Reader, pkg string) (docLists, error) {
	lists := docLists{}
	seen := map[string]map[string]bool{} // "file: name" → its labels
	label, file := "", ""
	in, found := false, false
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == "// # Life of a request":
			in = true
			continue
		case !strings.HasPrefix(line, "//") || strings.HasPrefix(line, "// # "):
			in = false
			continue
		case !in || !strings.HasPrefix(line, "//\t"):
			continue
		}
		found = true
		text := strings.TrimSpace(line[len("//\t"):])
		head, rest, colon := strings.Cut(text, ":")
		switch {
		case colon && strings.HasSuffix(head, ".go"):
			if label == "" {
				return nil, fmt.Errorf("line %d: %s before a kind's label", n, head)
			}
			file = head
			if !strings.Contains(file, "/") {
				file = pkg + "/" + file
			}
		case colon && !strings.ContainsAny(head, " ,."):
			if !isLabel(head) {
				return nil, fmt.Errorf("line %d: %q is no kind (%s)", n, head, strings.Join(labels(), ", "))
			}
			if _, ok := lists[head]; ok {
				return nil, fmt.Errorf("line %d: %s: listed twice", n, head)
			}
			label, file = head, ""
			lists[label] = nil
			continue
		case file == "":
			return nil, fmt.Errorf("line %d: %q: neither a kind's label nor a file's list", n, text)
		default:
			rest = text // a file's list, continued
		}
		for name := range strings.SplitSeq(rest, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			key := file + ": " + name
			if l := seen[key]; l[label] || l[everyLabel] || label == everyLabel && len(l) > 0 {
				return nil, fmt.Errorf("line %d: %s: listed twice (%s)", n, key, strings.Join(append(slices.Sorted(maps.Keys(l)), label), ", "))
			}
			if seen[key] == nil {
				seen[key] = map[string]bool{}
			}
			seen[key][label] = true
			lists[label] = append(lists[label], key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf(`no list in its "# Life of a request" section (scripts/pathwidth/docs.go says the form)`)
	}
	for _, l := range labels() {
		if _, ok := lists[l]; !ok {
			return nil, fmt.Errorf("no %q label in the list", l)
		}
	}
	return lists, nil
}

func labels() []string {
	ls := []string{everyLabel}
	for _, k := range kinds {
		ls = append(ls, k.key)
	}
	return ls
}

func isLabel(s string) bool {
	for _, l := range labels() {
		if s == l {
			return true
		}
	}
	return false
}

// compare says, kind by kind, which functions the doc.go lists that did
// not run and which ran that it does not list.
func compare(doc docLists, measured paths) []string {
	var diffs []string
	for _, k := range kinds {
		want := map[string]bool{}
		for _, key := range append(append([]string(nil), doc[everyLabel]...), doc[k.key]...) {
			want[key] = true
		}
		ran := map[string]bool{}
		for _, f := range measured[k.key].fns {
			ran[f.file+": "+f.name] = true
		}
		if d := missing(want, ran); len(d) > 0 {
			diffs = append(diffs, fmt.Sprintf("%s: listed, but did not run: %s", k.key, strings.Join(d, "; ")))
		}
		if d := missing(ran, want); len(d) > 0 {
			diffs = append(diffs, fmt.Sprintf("%s: ran, but not listed: %s", k.key, strings.Join(d, "; ")))
		}
	}
	return diffs
}

// missing returns the keys of a that b lacks, sorted.
func missing(a, b map[string]bool) []string {
	var d []string
	for k := range a {
		if !b[k] {
			d = append(d, k)
		}
	}
	sort.Strings(d)
	return d
}

// writeLists writes a backend's measured paths as its doc.go carries
// them (without the comment's "//"): what every kind runs, then what
// each adds.
func writeLists(w io.Writer, be string, ps paths) {
	count := map[string]int{}
	var all []fn
	for _, k := range kinds {
		for _, f := range ps[k.key].fns {
			count[f.file+": "+f.name]++
			all = append(all, f)
		}
	}
	every := func(f fn) bool { return count[f.file+": "+f.name] == len(kinds) }
	writeList(w, be, everyLabel+":", filter(union(all), every))
	for _, k := range kinds {
		own := filter(ps[k.key].fns, func(f fn) bool { return !every(f) })
		head := k.key + ":"
		if len(own) == 0 {
			head += " nothing of its own"
		}
		writeList(w, be, head, own)
	}
}

func filter(fns []fn, keep func(fn) bool) []fn {
	var out []fn
	for _, f := range fns {
		if keep(f) {
			out = append(out, f)
		}
	}
	return out
}

// writeList writes one label and its files' lines, the package's own
// files first, each line wrapped before 72 columns.
func writeList(w io.Writer, be, head string, fns []fn) {
	own := func(f fn) bool { return strings.HasPrefix(f.file, be+"/") }
	fns = append([]fn(nil), fns...)
	sortFns(fns)
	sort.SliceStable(fns, func(i, j int) bool { return own(fns[i]) && !own(fns[j]) })
	fmt.Fprintf(w, "\t%s\n", head)
	for i := 0; i < len(fns); {
		file := fns[i].file
		line := "\t  " + strings.TrimPrefix(file, be+"/") + ":"
		for ; i < len(fns) && fns[i].file == file; i++ {
			name := " " + fns[i].name
			if i+1 < len(fns) && fns[i+1].file == file {
				name += ","
			}
			if len(line)+len(name) > 72 && !strings.HasSuffix(line, ":") {
				fmt.Fprintln(w, line)
				line = "\t   "
			}
			line += name
		}
		fmt.Fprintln(w, line)
	}
}
