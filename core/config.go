package core

import (
	"io"
	"net/netip"
	"path/filepath"
	"strings"
	"time"
)

// SendfileMode says how file bodies leave the server.
type SendfileMode uint8

const (
	// SendfileAuto keeps bodies up to Config.MemBodyMax in memory (one write
	// for header and body) and sends larger ones from the file (zero copy).
	SendfileAuto SendfileMode = iota
	// SendfileAlways sends every body from its file, even a 100-byte one.
	SendfileAlways
	// SendfileNever keeps every body up to a quarter of CacheBytes in
	// memory; larger ones are still sent from the file.
	SendfileNever
)

// Config is everything the core needs to know. Zero fields take the
// defaults in DefaultConfig.
type Config struct {
	Dir             string        // document root
	Limits          Limits        // request head limits
	MemBodyMax      int64         // bodies up to this size are cached in memory
	CacheEntries    int           // most files the cache keeps open per loop; errors kept apart (maxErrors)
	CacheBytes      int64         // most body bytes the cache keeps in memory per loop
	OutBufMax       int           // pipelined responses batched per write before parsing pauses
	InBufMax        int           // unparsed input buffered per connection before reading pauses
	MaxBody         int64         // request bodies up to this are read (and dropped on static paths, passed to CGI scripts); larger: 413; negative: every body gets 413
	HeaderTimeout   time.Duration // a started request head must be complete within this (408)
	BodyTimeout     time.Duration // a request body that makes no progress for this long gets 408
	KeepAlive       time.Duration // an idle keep-alive connection is closed after this
	NoKeepAlive     bool          // --no-keepalive: every response closes its connection (ablation)
	WriteTimeout    time.Duration // a response that makes no progress for this long is dropped
	LingerTimeout   time.Duration // after an error response, unread input is drained this long before close
	ShutdownTimeout time.Duration
	MaxConns        int           // most open connections per loop; beyond it new ones are closed at once
	Sendfile        SendfileMode  // --sendfile
	NoFileCache     bool          // --no-file-cache: open and fstat on every request (ablation)
	CacheInactive   time.Duration // a cached file no request used for this long is closed (nginx open_file_cache inactive)
	FSTimeout       time.Duration // a request waiting this long for the file system gets 503 (a hung NFS server); a response whose body's next part is read that long is closed (Conn.BodyWait)
	ServerName      string        // Server header value
	AccessLog       io.Writer     // nil: no access log
	LogFormat       LogFormat     // the access log's (accesslog.go): LogCombined (default) or LogJSON
	Backend         string        // the backend's name (--backend), for LogJSON's "backend"
	AutoIndex       bool          // list directories that have no index.html (nginx autoindex)
	FollowSymlinks  bool          // follow symlinks that lead outside Dir (nginx's default; ours refuses them)
	CGIDir          string        // executables here answer /cgi-bin/NAME (RFC 3875); "" (default): no CGI
	CGITimeout      time.Duration // a script still running after this is killed (504 if nothing was sent)
	// CGIMax is the most scripts running at once in the process, across
	// its loops; a script counts from its fork until it is reaped, and
	// what it left running with it. Beyond it a request for a script gets
	// 503 with Retry-After, without a fork. Default 64 (DefaultConfig
	// says why).
	CGIMax int
	// MaxRanges is the most ranges one Range field may ask for; more, and
	// the whole file is sent with 200 (nginx max_ranges). 0 takes the
	// default; negative ignores every Range (Accept-Ranges: none).
	MaxRanges int
	// Precompressed serves FILE.br, FILE.zst or FILE.gz for FILE when the
	// client accepts that coding (nginx gzip_static, extended).
	Precompressed bool
	// CacheControl is the Cache-Control value for files; CacheControlByExt
	// overrides it by lower-case extension (".css"). "" sends none.
	CacheControl      string
	CacheControlByExt map[string]string
	// Headers are the --header rules: fields added to the answers for
	// files by their URL path (HeaderRule says which answers, and how
	// patterns match). Checked by NewServer.
	Headers []HeaderRule
	// Fallback is the URL path of the file (e.g. "/index.html") that
	// answers a GET or HEAD for a path that does not exist, with 200
	// (fallback.go); "" (default): none. NewServer refuses a missing one.
	Fallback string
	// ErrorPages are the --error-page files by status (ErrorPageCodes):
	// URL paths inside Dir whose bytes answer that error (errorpage.go).
	ErrorPages map[int]string
	// ProxyProtocol: every connection starts with a PROXY protocol
	// header, v1 or v2 (proxy.go), whose address is the client's from
	// then on (Conn.Remote: the access log, CGI's REMOTE_ADDR). Only a
	// peer in ProxyFrom may send one; any other connection is closed
	// unserved, as is one whose header is malformed, truncated or not
	// whole within HeaderTimeout.
	ProxyProtocol bool
	// ProxyFrom are the networks of the balancers trusted to send the
	// header; nil takes DefaultConfig's, loopback (a balancer on the
	// same host, as HAProxy beside the server).
	ProxyFrom []netip.Prefix
	// ErrorLog is where the file-system errors that a client can be told
	// no more of than 500 or 503 are logged, a line a second at most
	// (errlog.go); nil is stderr.
	ErrorLog io.Writer
	// WrapFileCalls, for tests, wraps every loop's FileCalls: a slow
	// file system, latency injected where the helpers make their calls.
	WrapFileCalls func(FileCalls) FileCalls
}

// cacheControlFor is the Cache-Control value for the file at path.
func (c *Config) cacheControlFor(path string) string {
	if len(c.CacheControlByExt) > 0 {
		if v, ok := c.CacheControlByExt[strings.ToLower(filepath.Ext(path))]; ok {
			return v
		}
	}
	return c.CacheControl
}

// DefaultConfig holds the defaults, chosen to match nginx where it has one.
var DefaultConfig = Config{
	Dir:             ".",
	MemBodyMax:      64 << 10,
	CacheEntries:    4096,
	CacheBytes:      64 << 20,
	OutBufMax:       64 << 10,
	InBufMax:        64 << 10,
	MaxBody:         1 << 20,          // nginx client_max_body_size
	HeaderTimeout:   60 * time.Second, // nginx client_header_timeout
	BodyTimeout:     60 * time.Second, // nginx client_body_timeout
	KeepAlive:       75 * time.Second, // nginx keepalive_timeout
	WriteTimeout:    60 * time.Second, // nginx send_timeout
	LingerTimeout:   5 * time.Second,  // nginx lingering_timeout
	ShutdownTimeout: 5 * time.Second,
	CGITimeout:      30 * time.Second,
	CacheInactive:   60 * time.Second, // nginx open_file_cache inactive
	FSTimeout:       30 * time.Second,
	MaxConns:        65536,
	MaxRanges:       100,
	ProxyFrom:       []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	ServerName:      "twinloop",
	// 64 scripts: a fixed pool, as FastCGI servers keep (php-fpm's
	// pm.max_children is 5, fcgiwrap runs one), rather than one process
	// per connection (65536 per loop); plenty for a 2-to-16-core machine
	// whose scripts wait on I/O, and on io_uring their pipes' share of
	// the pipe budget (32 pages each, backend/uring/budget_linux.go) is
	// 2048 pages, a sixth of the default, the rest being the file
	// bodies'. Not scaled by --loops: the
	// processes, not the loops, are what is bounded.
	CGIMax: 64,
}

func (c *Config) fill() {
	d := &DefaultConfig
	if c.Dir == "" {
		c.Dir = d.Dir
	}
	if c.MemBodyMax == 0 {
		c.MemBodyMax = d.MemBodyMax
	}
	if c.CacheEntries == 0 {
		c.CacheEntries = d.CacheEntries
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = d.CacheBytes
	}
	if c.OutBufMax == 0 {
		c.OutBufMax = d.OutBufMax
	}
	if c.InBufMax == 0 {
		c.InBufMax = d.InBufMax
	}
	if c.MaxBody == 0 {
		c.MaxBody = d.MaxBody
	}
	if c.HeaderTimeout == 0 {
		c.HeaderTimeout = d.HeaderTimeout
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = d.BodyTimeout
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = d.KeepAlive
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.LingerTimeout == 0 {
		c.LingerTimeout = d.LingerTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.CGITimeout == 0 {
		c.CGITimeout = d.CGITimeout
	}
	if c.CacheInactive == 0 {
		c.CacheInactive = d.CacheInactive
	}
	if c.FSTimeout == 0 {
		c.FSTimeout = d.FSTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = d.MaxConns
	}
	if c.CGIMax <= 0 {
		c.CGIMax = d.CGIMax
	}
	if c.MaxRanges == 0 {
		c.MaxRanges = d.MaxRanges
	}
	if c.ProxyFrom == nil {
		c.ProxyFrom = d.ProxyFrom
	}
	if c.ServerName == "" {
		c.ServerName = d.ServerName
	}
	c.Limits = c.Limits.withDefaults()
}
