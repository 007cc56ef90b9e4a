package web

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"path"
	"testing"
)

// bundleBudget is the most the page's script and style sheet may weigh gzipped, as a
// browser downloads them: the page should open fast on a slow link too. Raise it only
// for something worth the weight.
const bundleBudget = 200 << 10

func TestBundleBudget(t *testing.T) {
	var total int
	err := fs.WalkDir(dist, "dist", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := path.Ext(name); ext != ".js" && ext != ".css" {
			return nil
		}
		body, err := fs.ReadFile(dist, name)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			return err
		}
		if _, err := w.Write(body); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		t.Logf("%s: %d bytes, %d gzipped", name, len(body), buf.Len())
		total += buf.Len()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 {
		t.Fatal("web/dist holds no script or style sheet: run scripts/build-web.sh")
	}
	if total > bundleBudget {
		t.Errorf("the page's bundle weighs %d bytes gzipped, over its budget of %d: drop weight (fewer highlight.js languages, a smaller library) or raise the budget on purpose", total, bundleBudget)
	}
}
