package core

import (
	"mime"
	"path"
	"strings"
)

// builtinTypes is consulted before Go's mime package so that the common web
// types do not depend on the host's /etc/mime.types. Text types carry a
// charset, as nginx's charset directive would add.
var builtinTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".htm":   "text/html; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".txt":   "text/plain; charset=utf-8",
	".md":    "text/markdown; charset=utf-8",
	".csv":   "text/csv; charset=utf-8",
	".xml":   "text/xml; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".jpg":   "image/jpeg",
	".jpeg":  "image/jpeg",
	".gif":   "image/gif",
	".webp":  "image/webp",
	".avif":  "image/avif",
	".ico":   "image/x-icon",
	".bmp":   "image/bmp",
	".woff":  "font/woff",
	".woff2": "font/woff2",
	".ttf":   "font/ttf",
	".otf":   "font/otf",
	".wasm":  "application/wasm",
	".pdf":   "application/pdf",
	".zip":   "application/zip",
	".gz":    "application/gzip",
	".tar":   "application/x-tar",
	".mp4":   "video/mp4",
	".webm":  "video/webm",
	".mp3":   "audio/mpeg",
	".ogg":   "audio/ogg",
	".wav":   "audio/wav",
	".bin":   "application/octet-stream",
}

// contentType returns the Content-Type for a file name; unknown types are
// application/octet-stream, as nginx's default_type.
func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := builtinTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		if strings.HasPrefix(t, "text/") && !strings.Contains(t, "charset") {
			t += "; charset=utf-8"
		}
		return t
	}
	return "application/octet-stream"
}
