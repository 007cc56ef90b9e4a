package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// The page at /, the bundle it names with long caching, 304 on a matching ETag, and
// nothing else.
func TestHandler(t *testing.T) {
	h := Handler()
	resp := get(t, h, http.MethodGet, "/", nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		resp.Header.Get("Cache-Control") != "no-cache" || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("GET /: %d %v", resp.StatusCode, resp.Header)
	}
	assets := regexp.MustCompile(`"\./(app-[0-9a-f]{12}\.(js|css))"`).FindAllStringSubmatch(string(body), -1)
	if len(assets) != 2 {
		t.Fatalf("index.html names %d hashed assets, want the script and the style sheet:\n%s", len(assets), body)
	}
	for _, a := range assets {
		resp := get(t, h, http.MethodGet, "/"+a[1], nil)
		wantType := map[string]string{"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"}[a[2]]
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != wantType ||
			!strings.Contains(resp.Header.Get("Cache-Control"), "immutable") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /%s: %d %v; want %s, cached for good", a[1], resp.StatusCode, resp.Header, wantType)
		}
		again := get(t, h, http.MethodGet, "/"+a[1], http.Header{"If-None-Match": {resp.Header.Get("ETag")}})
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("GET /%s with its ETag: %d, want 304", a[1], again.StatusCode)
		}
	}
	if resp := get(t, h, http.MethodGet, "/index.html", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /index.html: %d", resp.StatusCode)
	}
	for _, path := range []string{"/agentic.v1.AgenticService/Nope", "/session/123", "/app.js", "/../web.go"} {
		if resp := get(t, h, http.MethodGet, path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	if resp := get(t, h, http.MethodPost, "/", nil); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d %v, want 405 with Allow", resp.StatusCode, resp.Header)
	}
	if resp := get(t, h, http.MethodHead, "/", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /: %d", resp.StatusCode)
	}
}
