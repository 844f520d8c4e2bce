package core

import (
	"html"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// listing builds the --autoindex page for the directory open as fd, in
// nginx's format: directories first, then files, each sorted by name,
// hidden entries left out, names HTML-escaped and hrefs percent-encoded.
// It lists only what a request would serve (entryInfo): the size and date
// of a symlink's target outside the root never show.
// The page is built once and cached like a file body; the directory's mtime
// tells when to build it again.
//
// A listing holds at most maxListed entries: a directory with a million
// would otherwise be read, stat'ed and kept whole, and flush the loop's
// cache. Past the bound the first maxListed names the directory returns
// are listed, sorted, and a last line says the listing is truncated (nginx
// lists everything; a 403 or 500 would hide the whole directory).
func (ld *loader) listing(f *File, pfd int) (*File, int) {
	fd, err := ld.openDir(pfd)
	if err != nil {
		return nil, ld.status(err)
	}
	defer ld.fs.close(fd)
	names, more, err := ld.dirNames(fd, maxListed)
	if err != nil {
		return nil, ld.status(err)
	}
	type item struct {
		name string
		dir  bool
		info fileInfo
	}
	var items []item
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		info, ok := ld.entryInfo(fd, f.path, name)
		if !ok {
			continue
		}
		items = append(items, item{name: name, dir: info.isDir(), info: info})
	}
	slices.SortFunc(items, func(a, b item) int {
		if a.dir != b.dir {
			if a.dir {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	title := html.EscapeString(shownName("/" + f.key))
	var b strings.Builder
	b.WriteString("<html>\r\n<head><title>Index of " + title + "</title></head>\r\n<body>\r\n<h1>Index of " +
		title + "</h1><hr><pre><a href=\"../\">../</a>\r\n")
	for _, it := range items {
		name, href := it.name, html.EscapeString(entryHref(it.name))
		size := strconv.FormatInt(it.info.size, 10)
		if it.dir {
			name, href, size = name+"/", href+"/", "-"
		}
		shown := []rune(shownName(name))
		if len(shown) > 50 {
			shown = append(shown[:47], []rune("..>")...)
		}
		b.WriteString("<a href=\"" + href + "\">" + html.EscapeString(string(shown)) + "</a>")
		b.WriteString(strings.Repeat(" ", max(51-len(shown), 1)))
		b.WriteString(it.info.mtime.UTC().Format("02-Jan-2006 15:04"))
		b.WriteString(strings.Repeat(" ", max(20-len(size), 1)) + size + "\r\n")
	}
	if more {
		b.WriteString("\r\n(listing truncated: only " + strconv.Itoa(maxListed) + " entries are shown)\r\n")
	}
	b.WriteString("</pre><hr></body>\r\n</html>\r\n")
	f.kind = kindListing
	f.fd = -1
	// A listing over copyBodyMax is sent from its entry, as a file's body
	// is, so it lives where the kernel may read it after a call returns:
	// in an anonymous mapping, unmapped with the File (readBody says why).
	if page := b.String(); len(page) > copyBodyMax {
		m, err := ld.fs.mmap(len(page))
		if err != nil {
			return nil, ld.status(err)
		}
		f.body, f.mapped = m[:copy(m, page)], true
	} else {
		f.body = []byte(page)
	}
	f.info.size = int64(len(f.body))
	f.buildHead(ld.headFor(f, nil))
	return f, 0
}

// entryHref is the link to the entry name from its directory's listing:
// a relative path, percent-encoded so that '?', '#', '%', '/' and bytes
// that are not printable ASCII stay in the name. url.PathEscape keeps ':',
// and a first segment with a colon reads as a scheme ("javascript:...",
// which runs script in the site's origin), so such a name starts with
// "./", as nginx's autoindex does.
func entryHref(name string) string {
	href := url.PathEscape(name)
	if strings.IndexByte(href, ':') >= 0 {
		href = "./" + href
	}
	return href
}

// shownName is name as a listing shows it: valid UTF-8, each byte that is
// not (and each control character, such as CR or LF, which would break the
// line) shown as U+FFFD. The page says charset=utf-8.
func shownName(name string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return utf8.RuneError
		}
		return r
	}, name)
}

// maxListed bounds a listing's entries (listing).
var maxListed = 10000

// entryInfo stats the entry name of the directory rel, open as fd, as a
// request for it would find it; ok is false when a request would not
// serve it: a symlink that leads outside the root (unless FollowSymlinks)
// or nowhere, a FIFO, a device, or an entry removed meanwhile.
func (ld *loader) entryInfo(fd int, rel, name string) (fileInfo, bool) {
	// Stat relative to the directory's fd, not by a path name from the
	// working directory.
	info, err := ld.lstatAt(fd, name)
	if err == nil && info.isSymlink() {
		// Only a symlink needs the request's own open, with its
		// RESOLVE_BENEATH; a plain entry is what its lstat says.
		if rel != "" {
			name = rel + "/" + name
		}
		var lfd int
		if lfd, info, err = ld.openBeneath(name); err == nil {
			ld.fs.close(lfd)
		}
	}
	return info, err == nil && (info.isDir() || info.isReg())
}
