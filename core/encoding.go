package core

// Precompressed files (Config.Precompressed, as nginx's gzip_static but for
// Brotli and Zstandard too): for FILE, the sidecars FILE.br, FILE.zst and
// FILE.gz are other representations of the same resource (RFC 9110 §8.4),
// chosen per request by Accept-Encoding (§12.5.3). They are found when FILE
// is loaded into the cache and kept with its entry (fd, stat, header, small
// bodies in memory), so a hit makes no syscall for them either; the once a
// second re-stat of the entry (fsop.go) covers them too. A request for FILE.gz itself
// is an ordinary file, served as application/gzip.

// coding is a content coding a sidecar can have.
type coding struct {
	name string // as in Content-Encoding and Accept-Encoding
	ext  string // the sidecar's suffix
}

// codings are the sidecars looked for, in order of preference when two are
// acceptable with the same weight and the same size.
var codings = [...]coding{
	{name: "br", ext: ".br"},
	{name: "zstd", ext: ".zst"},
	{name: "gzip", ext: ".gz"},
}

const numCodings = len(codings)

// sidecars are a file's precompressed representations. Immutable once
// loaded; a change to any of them on disk reloads the whole entry.
type sidecars struct {
	rep  [numCodings]*File    // nil: no such file, not a regular file, or older than the source
	name [numCodings]string   // the paths looked at, relative to the root
	seen [numCodings]fileInfo // what stat said at load; mode 0: nothing there
	any  bool                 // some rep is non-nil
}

// loadSidecars looks for f's sidecars. Each that is used holds one
// reference owned by f, given back when f's last reference is. It returns
// needsDisk when the probe must hand the load to a helper (the caller
// undoes f), else 0.
func (ld *loader) loadSidecars(f *File) int {
	s := &sidecars{}
	f.side = s
	for k := range codings {
		s.name[k] = f.path + codings[k].ext
		fd, fi, err := ld.openBeneath(s.name[k])
		if err != nil {
			st := ld.status(err)
			if st == needsDisk || st != 404 && ld.nowait {
				return needsDisk // the stat below goes by path, which may wait
			}
			if st != 404 {
				// Unreadable, special, or leads outside the root: not
				// served, but remembered as it stats, so that the
				// re-stat does not see a change every second.
				s.seen[k], _ = ld.statBeneath(s.name[k])
			}
			continue
		}
		s.seen[k] = fi
		// A sidecar older than its source was made from an older version
		// of it (nginx gzip_static does not check, and serves it).
		if !fi.isReg() || fi.mtime.Before(f.info.mtime) {
			ld.fs.close(fd)
			continue
		}
		a := &File{path: s.name[k], kind: kindFile, fd: fd, info: fi, refs: 1}
		ld.mark(a)
		if ld.keepsInMemory(fi.size) {
			if err := ld.readBody(a, fd, fi.size); err != nil {
				ld.fs.close(fd)
				if ld.status(err) == needsDisk {
					return needsDisk
				}
				continue
			}
		}
		h := ld.headFor(f, &codings[k])
		a.buildHead(h)
		s.rep[k], s.any = a, true
	}
	return 0
}

// sidecarsUnchanged re-stats the sidecars' names: a sidecar made, removed
// or replaced since the load reloads the entry.
func (ld *loader) sidecarsUnchanged(s *sidecars) (bool, int) {
	for k := range codings {
		fi, err := ld.statBeneath(s.name[k])
		if err != nil {
			if st := ld.status(err); st == needsDisk {
				return false, st
			}
			fi = fileInfo{}
		}
		if fi.mode != s.seen[k].mode || fi.mode != 0 && !fi.same(&s.seen[k]) {
			return false, 0
		}
	}
	return true, 0
}

// pick returns the representation of f to send for r, holding a reference
// in place of the caller's reference to f. Without an Accept-Encoding
// field it is f itself: the RFC would allow any coding then, but a client
// that says nothing (curl without --compressed) wants the file as it is.
func (c *fileCache) pick(f *File, r *Request) *File {
	if !f.side.any || !r.HasAcceptEncoding {
		return f
	}
	acc := parseAcceptEncoding(r.AcceptEncoding)
	best, bestQ := f, acc.identity
	for k, a := range f.side.rep {
		q := acc.coding[k]
		if a == nil || q <= 0 {
			continue
		}
		if q > bestQ || q == bestQ && a.info.size < best.info.size {
			best, bestQ = a, q
		}
	}
	// Identity unacceptable and no sidecar acceptable either: the field
	// is disregarded (RFC 9110 §12.1) and the file sent as it is, as
	// nginx does, rather than 406.
	if best != f {
		best.refs++
		c.release(f)
	}
	return best
}

// acceptance is what an Accept-Encoding field says of each coding, as
// weights in thousandths (RFC 9110 §12.4.2): 0 is "not acceptable".
type acceptance struct {
	coding   [numCodings]int
	identity int
}

// parseAcceptEncoding reads Accept-Encoding (RFC 9110 §12.5.3): a coding
// not listed takes the weight of "*" if listed, else 0; identity not
// listed takes the weight of "*" if listed, else is acceptable (1000), so
// that with equal weights the smallest representation wins. An empty
// field leaves identity alone. Codings are case-insensitive; x-gzip is
// gzip (§8.4.1.3). An element with a malformed weight is ignored.
func parseAcceptEncoding(v []byte) acceptance {
	const unlisted = -1
	a := acceptance{coding: [numCodings]int{unlisted, unlisted, unlisted}, identity: unlisted}
	star := unlisted
	for more := true; more; {
		var elem []byte
		elem, v, more = cutElement(v)
		name, q, ok := codingWeight(elem)
		if !ok {
			continue
		}
		switch {
		case equalFold(name, "identity"):
			a.identity = firstWeight(a.identity, q)
		case equalFold(name, "*"):
			star = firstWeight(star, q)
		case equalFold(name, "x-gzip"):
			a.coding[2] = firstWeight(a.coding[2], q)
		default:
			for k := range codings {
				if equalFold(name, codings[k].name) {
					a.coding[k] = firstWeight(a.coding[k], q)
				}
			}
		}
	}
	for k := range a.coding {
		if a.coding[k] == unlisted {
			a.coding[k] = max(star, 0)
		}
	}
	if a.identity == unlisted {
		a.identity = 1000
		if star != unlisted {
			a.identity = star
		}
	}
	return a
}

// firstWeight keeps the weight of a coding's first listing.
func firstWeight(old, q int) int {
	if old >= 0 {
		return old
	}
	return q
}

// codingWeight splits `coding [ OWS ";" OWS "q=" qvalue ]`; ok is false for
// an empty element or a malformed weight.
func codingWeight(elem []byte) (name []byte, q int, ok bool) {
	name, q = elem, 1000
	for i, ch := range elem {
		if ch == ';' {
			name = trimOWS(elem[:i])
			p := trimOWS(elem[i+1:])
			if len(p) < 2 || p[0]|0x20 != 'q' || p[1] != '=' {
				return nil, 0, false
			}
			if q, ok = parseQValue(p[2:]); !ok {
				return nil, 0, false
			}
			break
		}
	}
	return name, q, len(name) > 0
}

// parseQValue reads qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
// (RFC 9110 §12.4.2) in thousandths.
func parseQValue(b []byte) (int, bool) {
	if len(b) == 0 || b[0] != '0' && b[0] != '1' || len(b) > 5 || len(b) > 1 && b[1] != '.' {
		return 0, false
	}
	q := int(b[0]-'0') * 1000
	scale := 100
	for _, ch := range b[min(len(b), 2):] {
		if ch < '0' || ch > '9' || b[0] == '1' && ch != '0' {
			return 0, false
		}
		q += int(ch-'0') * scale
		scale /= 10
	}
	return q, true
}
