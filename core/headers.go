package core

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// HeaderRule is one --header: the field Name: Value on the answers for
// files whose URL path Pattern matches. The fields are built into the
// file's cached header when it is loaded (File.validators), so a hit
// pays nothing for them, however many rules there are.
//
// They go on what represents the file: 200, 206 (multipart included)
// and 304, to GET and HEAD alike, of files, directory indexes, listings
// (--autoindex), precompressed sidecars (matched as their file), and the
// SPA fallback (matched as the fallback file's own path). Never on an
// error (412 and 416 included, and error pages), a redirect, OPTIONS or
// a CGI script's answer: the rules describe a file's representation, and
// an error has none (nginx's add_header without always does the same; a
// script sends its own fields).
//
// Patterns (matchPattern) are globs on the request's path once it is
// percent-decoded and cleaned, as the file cache keys it:
//
//   - A pattern that starts with '/' matches the whole path, segment by
//     segment: "/assets/**", "/index.html", "/docs/*.html". A directory
//     request ends in '/': "/" is the root's, "/docs/" the docs
//     directory's.
//   - A pattern without '/' matches the path's last segment, in any
//     directory: "*.js", "robots.txt". A directory request's last segment
//     is empty, which only "*" matches.
//   - In a segment, '*' is any run of bytes but '/', '?' one byte,
//     [a-z] a class, and '\' escapes (Go's path.Match). "**" as a whole
//     segment is any number of segments, none included: "/assets/**" is
//     "/assets", "/assets/" and everything below; elsewhere it is '*'.
//   - A directory request answered by its index.html matches as either
//     path: "/docs/" and "/docs/index.html" ("*.html" too), as nginx's
//     index, an internal redirect, is matched by its locations again.
//   - A pattern holding '/' must start with it; '=' cannot be in it (the
//     first '=' of the flag ends it).
//   - A pattern that can never match is refused (neverMatches): one with
//     a "." or ".." segment or an empty one ("//") inside, as cleaning
//     leaves none, or a hidden name (".git"), which is answered 403.
//
// Every matching rule applies, in the order given, one line each; a
// later rule for the same field name (in any case) takes the place of an
// earlier one, so that "/**=X-Frame-Options: DENY" then
// "/embed/**=X-Frame-Options: SAMEORIGIN" leaves one field.
type HeaderRule struct {
	Pattern string
	Name    string
	Value   string
}

// ParseHeaderRule reads "PATTERN=Name: value" and checks it (check).
func ParseHeaderRule(arg string) (HeaderRule, error) {
	pattern, field, ok := strings.Cut(arg, "=")
	name, value, ok2 := strings.Cut(field, ":")
	if !ok || !ok2 {
		return HeaderRule{}, fmt.Errorf("--header %q: write PATTERN=Name: value, e.g. '/assets/**=Cache-Control: max-age=60' or '*.js=X-Content-Type-Options: nosniff'", arg)
	}
	h := HeaderRule{Pattern: pattern, Name: name, Value: strings.Trim(value, " \t")}
	if err := h.check(); err != nil {
		return HeaderRule{}, fmt.Errorf("--header %q: %w", arg, err)
	}
	return h, nil
}

// String is the rule as --header takes it.
func (h HeaderRule) String() string { return h.Pattern + "=" + h.Name + ": " + h.Value }

// ownedFields are the fields the server sends itself, by lower-case
// name, and why a rule may not set them: each is computed per file or
// per response, or frames the message.
var ownedFields = map[string]string{
	"content-length":    "the server computes it for each answer",
	"transfer-encoding": "the server frames its answers itself",
	"connection":        "the server decides it for each answer (keep-alive or close)",
	"keep-alive":        "the server decides keep-alive itself",
	"upgrade":           "the server upgrades to no other protocol",
	"te":                "it is a request field",
	"trailer":           "the server sends trailers only for CGI scripts",
	"proxy-connection":  "it is a hop-by-hop field",
	"date":              "the server renders it every second",
	"server":            "the server names itself",
	"content-type":      "the server sends it from the file's extension",
	"content-encoding":  "the server sends it for precompressed files (--precompressed)",
	"content-range":     "the server sends it for ranges",
	"accept-ranges":     "the server sends it (--max-ranges)",
	"etag":              "the server computes it from the file",
	"last-modified":     "the server sends the file's",
	"vary":              "the server sends it for precompressed files (--precompressed)",
	"cache-control":     "it has a flag of its own: use --cache-control",
	"location":          "the server sends it for its redirects",
	"allow":             "the server sends it for OPTIONS and 405",
	"retry-after":       "the server sends it with 503",
}

// check refuses a rule the server could not send as asked: a bad
// pattern, a name that is not a field name (RFC 9110 §5.1) or that the
// server owns (ownedFields), a value that is empty or not a field value
// (§5.5: no CR, LF, NUL or other control byte).
func (h HeaderRule) check() error {
	switch {
	case h.Pattern == "":
		return errors.New("the pattern is empty: give one, such as /** for every path")
	case strings.Contains(h.Pattern, "/") && h.Pattern[0] != '/':
		return fmt.Errorf("pattern %q holds a '/' but does not start with one: anchor it (/%s) or give a last segment alone (*.js)", h.Pattern, h.Pattern)
	}
	for _, seg := range strings.Split(h.Pattern, "/") {
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("pattern %q: %v (see path.Match: *, ?, [class], \\ escapes; ** as a whole segment)", h.Pattern, err)
		}
	}
	if why := neverMatches(h.Pattern); why != "" {
		return fmt.Errorf("pattern %q can never match: %s", h.Pattern, why)
	}
	if h.Name == "" || strings.IndexFunc(h.Name, func(r rune) bool { return r >= 0x80 || chars[r]&isToken == 0 }) >= 0 {
		return fmt.Errorf("%q is not a field name (letters, digits and !#$%%&'*+-.^_`|~, nothing before the colon but the name)", h.Name)
	}
	if why, ok := ownedFields[strings.ToLower(h.Name)]; ok {
		return fmt.Errorf("%s is the server's own field: %s", h.Name, why)
	}
	if h.Value == "" {
		return fmt.Errorf("the value of %s is empty: give one", h.Name)
	}
	if i := strings.IndexFunc(h.Value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }); i >= 0 {
		return fmt.Errorf("the value of %s holds the control byte %q at %d: a field value is one line of visible characters, spaces and tabs", h.Name, h.Value[i], i)
	}
	return nil
}

// neverMatches says why pattern, checked otherwise, matches no path a
// rule is tried on, or "". Those paths are cleaned (resolvePath): no "."
// or ".." segment is left, and no empty one but a directory request's
// last ("/docs/"); and a hidden segment (a leading '.', .well-known
// excepted) is answered 403, which no rule goes on.
func neverMatches(pattern string) string {
	segs := strings.Split(pattern, "/")
	if pattern[0] == '/' {
		segs = segs[1:]
	}
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return fmt.Sprintf("request paths are cleaned before they are matched, so none has a %q segment%s", seg, cleaned(pattern))
		case seg == "" && i < len(segs)-1:
			return "request paths are cleaned before they are matched, so none has an empty segment (//)" + cleaned(pattern)
		case seg != "" && seg[0] == '.':
			if ok, _ := path.Match(seg, ".well-known"); !ok {
				return fmt.Sprintf("%q is a hidden name (a leading '.'), answered 403 whatever the rules, and rules go on 200, 206 and 304 only (/.well-known/ is the one hidden directory served)", seg)
			}
		}
	}
	return ""
}

// cleaned suggests pattern as a cleaned path reads, for neverMatches.
func cleaned(pattern string) string {
	if pattern[0] != '/' {
		return ""
	}
	c := path.Clean(pattern)
	if strings.HasSuffix(pattern, "/") && c != "/" {
		c += "/"
	}
	return fmt.Sprintf("; write it as a cleaned path reads, such as %s", c)
}

// matchPattern reports whether pattern matches p, a cleaned URL path
// starting with '/' (HeaderRule says how).
func matchPattern(pattern, p string) bool {
	if pattern[0] != '/' {
		return matchSegment(pattern, p[strings.LastIndexByte(p, '/')+1:])
	}
	return matchSegments(strings.Split(pattern[1:], "/"), strings.Split(p[1:], "/"))
}

func matchSegments(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := range len(segs) + 1 {
				if matchSegments(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 || !matchSegment(pat[0], segs[0]) {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

func matchSegment(pat, seg string) bool {
	ok, _ := path.Match(pat, seg) // checked at start (HeaderRule.check)
	return ok
}

// headerLines is the lines of the rules that match a file requested as
// key, served from path (a directory's index, else key), one per field
// name, the last matching rule's value for it (HeaderRule).
func headerLines(rules []HeaderRule, key, path string) string {
	if len(rules) == 0 {
		return ""
	}
	url, idx := "/"+key, ""
	if path != key {
		idx = "/" + path
	}
	var b strings.Builder
	for i, h := range rules {
		if !matchesFile(h.Pattern, url, idx) || laterNamed(rules[i+1:], h.Name, url, idx) {
			continue
		}
		b.WriteString(h.Name + ": " + h.Value + "\r\n")
	}
	return b.String()
}

func matchesFile(pattern, url, idx string) bool {
	return matchPattern(pattern, url) || idx != "" && matchPattern(pattern, idx)
}

// laterNamed reports whether one of rules, which come after a rule for
// name, sets name too for the same file: that one takes its place.
func laterNamed(rules []HeaderRule, name, url, idx string) bool {
	for _, h := range rules {
		if strings.EqualFold(h.Name, name) && matchesFile(h.Pattern, url, idx) {
			return true
		}
	}
	return false
}
