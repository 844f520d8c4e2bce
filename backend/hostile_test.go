package backend_test

// Hostile input found by review (issue 19), on every backend it applies
// to: file names that would turn a listing's link into script, chunk
// framing that carries no body, and clients that trickle.

import (
	"html"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestAutoIndexHrefs: every link of a listing is a relative path that
// cannot be read as a scheme, whatever the name holds (a "javascript:" name
// would run script in the site's origin), its text is escaped and valid
// UTF-8, and each link leads back to its file.
func TestAutoIndexHrefs(t *testing.T) {
	cases := []struct {
		name, href, text string
		dir              bool
	}{
		{name: "javascript:alert(document.domain)", href: "./javascript:alert%28document.domain%29", text: "javascript:alert(document.domain)"},
		{name: "data:text", href: "./data:text/", text: "data:text/", dir: true},
		{name: `q"uo'te`, href: "q%22uo%27te", text: "q&#34;uo&#39;te"},
		{name: "<b>&x", href: "%3Cb%3E&amp;x", text: "&lt;b&gt;&amp;x"},
		{name: "cr\r\nlf", href: "cr%0D%0Alf", text: "cr\uFFFD\uFFFDlf"},
		{name: "\xff\xfe.bin", href: "%FF%FE.bin", text: "\uFFFD\uFFFD.bin"},
		{name: "a?b#c", href: "a%3Fb%23c", text: "a?b#c"},
		{name: "100%", href: "100%25", text: "100%"},
		{name: "x;y,z", href: "x%3By%2Cz", text: "x;y,z"},
		{name: "é", href: "%C3%A9", text: "é"},
		// Cut at 50 characters, not bytes: a cut through a character
		// would leave bytes that are not UTF-8.
		{name: strings.Repeat("é", 60), href: strings.Repeat("%C3%A9", 60), text: strings.Repeat("é", 47) + "..&gt;"},
	}
	eachBackend(t, core.Config{AutoIndex: true}, func(t *testing.T, s *site, srv *servertest.Server) {
		nd := filepath.Join(s.dir, "noindex")
		for _, tc := range cases {
			if tc.dir {
				require.NoError(t, os.Mkdir(filepath.Join(nd, tc.name), 0o755))
				continue
			}
			require.NoError(t, os.WriteFile(filepath.Join(nd, tc.name), []byte("file "+tc.name), 0o644))
		}
		c := servertest.Dial(t, srv.Addr)
		resp, body := c.Get("/noindex/")
		require.Equal(t, 200, resp.StatusCode)
		page := string(body)
		for _, tc := range cases {
			assert.Contains(t, page, `<a href="`+tc.href+`">`+tc.text+`</a>`, "%q", tc.name)
		}
		for _, m := range regexp.MustCompile(`<a href="([^"]*)">`).FindAllStringSubmatch(page, -1) {
			u, err := url.Parse(html.UnescapeString(m[1]))
			require.NoError(t, err, m[1])
			assert.Empty(t, u.Scheme, "href %q has a scheme", m[1])
			assert.Empty(t, u.Opaque, m[1])
		}
		assert.True(t, strings.ToValidUTF8(page, "") == page, "the page is not UTF-8")

		// Each link, resolved against the listing's URL as a browser does,
		// names its file.
		base, err := url.Parse("http://t/noindex/")
		require.NoError(t, err)
		for _, tc := range cases {
			u, err := base.Parse(html.UnescapeString(tc.href))
			require.NoError(t, err)
			resp, got := c.Get(u.EscapedPath())
			require.Equal(t, 200, resp.StatusCode, "%q: %s", tc.name, u.EscapedPath())
			if tc.dir {
				assert.Contains(t, string(got), "<title>Index of ", tc.name)
			} else {
				assert.Equal(t, "file "+tc.name, string(got), u.EscapedPath())
			}
		}
	})
}
