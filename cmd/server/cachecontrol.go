package main

import (
	"fmt"
	"strings"
)

// cacheControl is --cache-control, parsed: a value for every file, and
// values by lower-case extension that take its place.
type cacheControl struct {
	all   string
	byExt map[string]string
}

// parseCacheControl reads each --cache-control as VALUE or
// .EXT[,.EXT]=VALUE. A Cache-Control value never starts with a dot, so the
// two cannot be confused.
func parseCacheControl(args []string) (cacheControl, error) {
	var cc cacheControl
	for _, a := range args {
		value, exts := a, ""
		if strings.HasPrefix(a, ".") {
			var ok bool
			if exts, value, ok = strings.Cut(a, "="); !ok {
				return cc, fmt.Errorf("--cache-control %q: give .EXT=VALUE, e.g. \".css,.js=max-age=31536000\"", a)
			}
		}
		value = strings.TrimSpace(value)
		if value == "" || strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return cc, fmt.Errorf("--cache-control %q: the value must be non-empty, on one line, without control characters", a)
		}
		if exts == "" {
			if cc.all != "" {
				return cc, fmt.Errorf("--cache-control given twice for all files (%q and %q): keep one, or prefix the other with .EXT=", cc.all, value)
			}
			cc.all = value
			continue
		}
		for _, ext := range strings.Split(exts, ",") {
			ext = strings.ToLower(strings.TrimSpace(ext))
			if len(ext) < 2 || ext[0] != '.' || strings.ContainsAny(ext[1:], "./ \t") {
				return cc, fmt.Errorf("--cache-control %q: %q is not an extension; write them as .css,.js", a, ext)
			}
			if cc.byExt == nil {
				cc.byExt = make(map[string]string)
			}
			cc.byExt[ext] = value
		}
	}
	return cc, nil
}
