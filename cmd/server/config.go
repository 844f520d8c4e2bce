package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	flags "github.com/jessevdk/go-flags"
)

// newParser is the command line's parser for o.
func newParser(o *options) *flags.Parser {
	p := flags.NewParser(o, flags.HelpFlag|flags.PassDoubleDash)
	p.Name = "server"
	p.Usage = "[OPTIONS]\n\ntwinloop serves the files under --dir over HTTP/1.1 with an epoll or io_uring event loop."
	return p
}

// parseOptions reads the flags: with --config FILE, the file first (by
// go-flags' own INI parser) and the command line over it, so that a flag
// given on the command line wins; a repeatable one given there replaces
// the file's list rather than adding to it (go-flags clears a list on its
// first value in each parse). The parser is returned for --write-config.
func parseOptions(args []string) (*options, *flags.Parser, error) {
	o := &options{}
	p := newParser(o)
	if err := parseArgs(p, args); err != nil || o.Config == "" {
		return o, p, err
	}
	file := o.Config
	o = &options{}
	p = newParser(o)
	if err := flags.NewIniParser(p).ParseFile(file); err != nil {
		return nil, nil, configError(file, err)
	}
	return o, p, parseArgs(p, args)
}

func parseArgs(p *flags.Parser, args []string) error {
	rest, err := p.ParseArgs(args)
	var ferr *flags.Error
	switch {
	case errors.As(err, &ferr) && ferr.Type == flags.ErrHelp:
		return err
	case err != nil:
		return fmt.Errorf("%v (see server --help)", err)
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q (flags start with --; see server --help)", rest[0])
	}
	return nil
}

// configError says where in --config's file err is, and what to do.
func configError(file string, err error) error {
	const how = "each line is KEY = VALUE, KEY a flag's long name without its dashes as server --help lists them, VALUE as on the command line, under a [section] only the keys of that --help group; server --write-config prints a file that works"
	var ierr *flags.IniError
	var ferr *flags.Error
	switch {
	case errors.As(err, &ierr):
		return fmt.Errorf("--config %s:%d: %s%s (%s)", ierr.File, ierr.LineNumber, quoteLine(ierr.File, ierr.LineNumber), ierr.Message, how)
	case errors.As(err, &ferr) && ferr.Type == flags.ErrUnknownGroup:
		return fmt.Errorf("--config %s: %s (put the keys before any [section], under [Application Options], or under their group's name in server --help, such as [Listening], as --write-config does)", file, ferr.Message)
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("--config: %w (give a readable INI file; server --write-config > FILE writes one)", err)
	}
	return fmt.Errorf("--config %s: %w (%s)", file, err, how)
}

// quoteLine is line n of file, quoted, for an error about it: go-flags'
// message for a bad value says what the value's type wanted, not which
// key it was for.
func quoteLine(file string, n uint) string {
	b, err := os.ReadFile(file)
	lines := strings.Split(string(b), "\n")
	if err != nil || n < 1 || int(n) > len(lines) {
		return ""
	}
	return strconv.Quote(strings.TrimSpace(lines[n-1])) + ": "
}

// fromConfig is what an error about a flag's value adds when the value
// may come from --config's file.
func (o *options) fromConfig() string {
	if o.Config == "" {
		return ""
	}
	return fmt.Sprintf(" (set in --config %s or on the command line)", o.Config)
}

// writeConfig prints the configuration p parsed in --config's format,
// every flag with its description, those at their defaults commented out
// (go-flags' own INI writer): fed back through --config it makes the same
// configuration.
func writeConfig(p *flags.Parser, w io.Writer) {
	fmt.Fprintf(w, "; twinloop configuration: server --config FILE reads it. Keys are the flags' long names\n; (server --help), each in the [section] of its --help group or before any section;\n; lines starting with ; are comments, and the flags at their default are commented out.\n\n")
	flags.NewIniParser(p).Write(w, flags.IniIncludeDefaults|flags.IniCommentDefaults|flags.IniIncludeComments)
}
