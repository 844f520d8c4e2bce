package main

import (
	"bufio"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	flags "github.com/jessevdk/go-flags"
)

// helpWidth is the column --help wraps at. go-flags' own help aligns
// every description after the longest flag of all groups
// (--uring-body=[sendfile|...], 48 columns) and wraps at the terminal's
// width, which left 22 columns a line and made 679 lines. Here each flag
// has its line and its description the lines below, at a fixed width,
// so that docs/flags.md, made from --help, is the same on every terminal.
const helpWidth = 80

const helpIntro = `twinloop serves the files under --dir over HTTP/1.1 with an epoll or io_uring
event loop. The operator's flags come first, by group; the lab's switches,
kept to measure what each default buys, last. docs/reference.md tells each
flag's story; docs/flags.md is this page.`

// writeHelp prints --help for p: the usage, then every group of flags in
// the order of the options struct (go-flags' "Help Options" last), each
// flag with its value, then its description and default.
func writeHelp(p *flags.Parser, w io.Writer) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	fmt.Fprintf(bw, "Usage:\n  %s [OPTIONS]\n\n%s\n", p.Name, helpIntro)
	var walk func(g *flags.Group)
	walk = func(g *flags.Group) {
		if g.Hidden {
			return
		}
		if opts := g.Options(); len(opts) > 0 {
			fmt.Fprintf(bw, "\n%s:\n", g.ShortDescription)
			if g.LongDescription != "" {
				wrap(bw, strings.Fields(g.LongDescription), "  ")
			}
			for _, o := range opts {
				if !o.Hidden {
					writeFlag(bw, o)
				}
			}
		}
		for _, sub := range g.Groups() {
			walk(sub)
		}
	}
	for _, g := range p.Groups() {
		walk(g)
	}
}

// writeFlag prints one flag: "  -p, --port=N", then its description and
// default indented below.
func writeFlag(w *bufio.Writer, o *flags.Option) {
	head := "  "
	if o.ShortName != 0 {
		head += "-" + string(o.ShortName) + ", "
	}
	head += "--" + o.LongName
	// Bools and go-flags' own -h (a func) take no value.
	if t := o.Field().Type; t.Kind() != reflect.Bool && t.Kind() != reflect.Func {
		head += "=" + valueName(o, t)
	}
	fmt.Fprintln(w, head)
	words := strings.Fields(o.Description)
	if len(o.Default) > 0 {
		// One unit, never split over two lines.
		words = append(words, "(default: "+strings.Join(o.Default, ", ")+")")
	}
	wrap(w, words, "      ")
}

// valueName is what a flag's value looks like: its value-name, its
// choices, or a word for its type.
func valueName(o *flags.Option, t reflect.Type) string {
	switch {
	case len(o.Choices) > 0:
		return o.ValueName + "[" + strings.Join(o.Choices, "|") + "]"
	case o.ValueName != "":
		return o.ValueName
	case t == reflect.TypeFor[time.Duration]():
		return "DURATION"
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		return "N"
	}
	return "VALUE"
}

// wrap writes words in lines of at most helpWidth columns (a longer word
// alone excepted), each starting with indent.
func wrap(w *bufio.Writer, words []string, indent string) {
	line := indent
	for _, word := range words {
		if len(line) > len(indent) && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > helpWidth {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	if len(line) > len(indent) {
		fmt.Fprintln(w, line)
	}
}
