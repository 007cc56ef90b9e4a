package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// DirEntry is one entry of ListDir. Symlinks are described as themselves
// (IsDir false), never by their target.
type DirEntry struct {
	Name    string
	IsDir   bool
	Size    int64
	ModTime time.Time
}

// ListDir lists a directory of the workspace ("" or "." is the root),
// sorted by name.
func (w *Workspace) ListDir(path string) ([]DirEntry, error) {
	if path == "" {
		path = "."
	}
	r, err := w.resolve(path)
	if err != nil {
		return nil, err
	}
	if r.info == nil {
		return nil, fmt.Errorf("%w: directory %s does not exist in the workspace", ErrNotFound, path)
	}
	if !r.info.IsDir() {
		return nil, fmt.Errorf("%w: %s is a file, not a directory; read it instead", ErrInvalidPath, path)
	}
	root, err := w.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	d, err := root.Open(r.rel)
	if err != nil {
		return nil, osError("open directory", path, err)
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, osError("list", path, err)
	}
	sortEntries(entries)
	out := make([]DirEntry, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // removed between listing and stat
		}
		out = append(out, DirEntry{Name: e.Name(), IsDir: fi.IsDir(), Size: fi.Size(), ModTime: fi.ModTime()})
	}
	return out, nil
}

// SearchQuery describes a SearchFiles request.
type SearchQuery struct {
	Pattern    string // Go regexp matched against each line
	Path       string // directory (or single file) to search; default the root
	Glob       string // optional filepath.Match pattern on file base names
	MaxResults int    // default 200
}

// SearchMatch is one matching line.
type SearchMatch struct {
	Path string // relative to the workspace root
	Line int    // 1-based
	Text string // the line without its terminator, cut to maxMatchText bytes
}

// maxMatchText bounds SearchMatch.Text so that a minified file cannot turn
// one match into megabytes.
const maxMatchText = 1000

// SearchFiles returns lines matching q.Pattern in the files under q.Path,
// in lexical path order, up to q.MaxResults. It skips .git directories,
// files over MaxReadBytes, binary files, directory symlinks, and symlinks
// leading out of the workspace.
func (w *Workspace) SearchFiles(ctx context.Context, q SearchQuery) ([]SearchMatch, error) {
	if q.Pattern == "" {
		return nil, fmt.Errorf("%w: empty search pattern", ErrInvalidArgument)
	}
	re, err := regexp.Compile(q.Pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: search pattern %q: %v", ErrInvalidArgument, q.Pattern, err)
	}
	if q.Glob != "" {
		if _, err := filepath.Match(q.Glob, ""); err != nil {
			return nil, fmt.Errorf("%w: glob %q: %v", ErrInvalidArgument, q.Glob, err)
		}
	}
	if q.MaxResults <= 0 {
		q.MaxResults = defaultSearchMaxResults
	}
	if q.Path == "" {
		q.Path = "."
	}
	r, err := w.resolve(q.Path)
	if err != nil {
		return nil, err
	}
	if r.info == nil {
		return nil, fmt.Errorf("%w: %s does not exist in the workspace", ErrNotFound, q.Path)
	}
	root, err := w.openRoot()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	s := &searcher{ws: w, root: root, re: re, glob: q.Glob, max: q.MaxResults}
	if !r.info.IsDir() {
		err = s.file(ctx, r.rel, r.rel)
	} else {
		err = s.dir(ctx, r.rel)
	}
	if err != nil && !errors.Is(err, errSearchFull) {
		return nil, err
	}
	return s.matches, nil
}

var errSearchFull = errors.New("search result limit reached")

type searcher struct {
	ws      *Workspace
	root    *os.Root
	re      *regexp.Regexp
	glob    string
	max     int
	matches []SearchMatch
}

func (s *searcher) dir(ctx context.Context, rel string) error {
	d, err := s.root.Open(rel)
	if err != nil {
		return nil // unreadable or vanished: nothing to search
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil
	}
	sortEntries(entries)
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		child := filepath.Join(rel, e.Name())
		if isExcluded(s.ws.opts.Excluded, filepath.Join(s.ws.root, child)) {
			continue // agenticd's own files: never searched, whatever their content
		}
		switch t := e.Type(); {
		case t.IsDir():
			if e.Name() == ".git" {
				continue
			}
			if err := s.dir(ctx, child); err != nil {
				return err
			}
		case t.IsRegular():
			if err := s.file(ctx, child, child); err != nil {
				return err
			}
		case t&fs.ModeSymlink != 0:
			// Follow file symlinks that stay inside; not directory ones,
			// which could loop and would repeat files already searched.
			target, err := s.ws.resolve(child)
			if err != nil || target.info == nil || !target.info.Mode().IsRegular() {
				continue
			}
			if err := s.file(ctx, target.rel, child); err != nil {
				return err
			}
		}
	}
	return nil
}

// file searches the regular file at rel, reporting matches under the name shown.
func (s *searcher) file(ctx context.Context, rel, shown string) error {
	if s.glob != "" {
		if ok, _ := filepath.Match(s.glob, filepath.Base(shown)); !ok {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := openRegular(s.root, rel, shown)
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, s.ws.opts.MaxReadBytes+1))
	if err != nil || int64(len(data)) > s.ws.opts.MaxReadBytes || !isText(data) {
		return nil
	}
	text := string(data)
	for lineNo := 1; text != ""; lineNo++ {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		line = strings.TrimSuffix(line, "\r")
		if !s.re.MatchString(line) {
			continue
		}
		s.matches = append(s.matches, SearchMatch{Path: shown, Line: lineNo, Text: cutText(line)})
		if len(s.matches) >= s.max {
			return errSearchFull
		}
	}
	return nil
}

func sortEntries(entries []fs.DirEntry) {
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
}

func cutText(line string) string {
	if len(line) <= maxMatchText {
		return line
	}
	cut := maxMatchText
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + "…"
}
