// Package web serves agenticd's web page: the bundle scripts/build-web.sh makes of
// web/src, embedded so that the server binary carries it.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"time"
)

//go:embed dist
var dist embed.FS

// contentTypes are fixed here rather than looked up in the machine's MIME tables, which
// differ between systems (.js as application/javascript or text/javascript).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// asset is one embedded file with the headers it is served with.
type asset struct {
	body         []byte
	contentType  string
	etag         string
	cacheControl string
}

// Handler serves the page: index.html at "/" (and "/index.html"), the bundle's files
// by name. Every other path is 404: the page keeps its own state in the URL's fragment,
// which never reaches the server, so no other path is the page, and a mistyped RPC
// path gets a plain 404 rather than a page of HTML that says nothing about the mistake.
func Handler() http.Handler {
	assets, err := load(dist)
	if err != nil {
		// The embedded files are fixed at build time; a bad bundle is a broken build.
		panic("web: " + err.Error())
	}
	return handler{assets: assets}
}

func load(fsys fs.FS) (map[string]asset, error) {
	files, err := fs.Sub(fsys, "dist")
	if err != nil {
		return nil, err
	}
	assets := make(map[string]asset)
	err = fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		a := asset{
			body:        body,
			contentType: contentTypes[path.Ext(name)],
			etag:        `"` + hex.EncodeToString(sum[:16]) + `"`,
			// The bundle's file names carry a hash of their content: a new build has new
			// names, so a browser may keep these for good. index.html names them, so it
			// is checked every time (its ETag makes that a 304 when nothing changed).
			cacheControl: "public, max-age=31536000, immutable",
		}
		if name == "index.html" {
			a.cacheControl = "no-cache"
		}
		if a.contentType == "" {
			return fmt.Errorf("%s: the bundle holds only .html, .js and .css files", name)
		}
		assets["/"+name] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := assets["/index.html"]; !ok {
		return nil, fs.ErrNotExist
	}
	return assets, nil
}

type handler struct {
	assets map[string]asset
}

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed: the web page answers GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	name := r.URL.Path
	if name == "/" {
		name = "/index.html"
	}
	a, ok := h.assets[name]
	if !ok {
		http.Error(w, "not found: the web page is at /", http.StatusNotFound)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", a.cacheControl)
	hdr.Set("ETag", a.etag)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	if name == "/index.html" {
		// The page loads only its own files and talks only to its own origin; nothing an
		// agent sends can add a script, and no other site may frame it.
		hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; "+
			"img-src 'self' data: https:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	}
	// ServeContent answers If-None-Match with 304 and Range requests from the ETag.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}
