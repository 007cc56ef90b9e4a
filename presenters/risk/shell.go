package risk

import "strings"

// This is a small shell tokenizer, not a shell parser: it knows quoting, escapes,
// command and process substitution, redirections and the list/pipeline operators, which
// is what classifying a command line needs. Constructs it does not understand read as
// plain words, so they are classified as (unknown) commands rather than ignored.

// word is one shell word after quote removal.
type word struct {
	text string
	// subs are the sources of the command and process substitutions in the word; text
	// holds them as "$(...)" placeholders.
	subs []string
	// expands is set when the word holds a variable or substitution: its value is unknown.
	expands bool
	// quoted is set when any part of the word was quoted.
	quoted bool
}

type redirect struct {
	op     string // ">", ">>", "<", "&>", "<<", "<<<", ">&"...
	target word
	dup    bool // ">&2", "2>&1": duplicates a descriptor, names no file
}

// simpleCmd is one command of a pipeline: its words and redirections.
type simpleCmd struct {
	words     []word
	redirects []redirect
}

// pipeline is commands joined by `|`.
type pipeline []simpleCmd

type lexer struct {
	s string
	i int
}

// parse splits a command line into pipelines (joined by ; & && || newlines and
// subshell parentheses, which only group).
func parse(src string) []pipeline {
	l := &lexer{s: src}
	var out []pipeline
	var pl pipeline
	var cur simpleCmd
	endCmd := func() {
		if len(cur.words) > 0 || len(cur.redirects) > 0 {
			pl = append(pl, cur)
		}
		cur = simpleCmd{}
	}
	endPipeline := func() {
		endCmd()
		if len(pl) > 0 {
			out = append(out, pl)
		}
		pl = nil
	}
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			l.i++
		case c == '\\' && l.peek(1) == '\n':
			l.i += 2
		case c == '\n' || c == ';' || c == '(' || c == ')':
			l.i++
			if c == ';' && l.peek(0) == ';' { // case terminator
				l.i++
			}
			endPipeline()
		case c == '&' && l.peek(1) == '&':
			l.i += 2
			endPipeline()
		case c == '|' && l.peek(1) == '|':
			l.i += 2
			endPipeline()
		case c == '|':
			l.i++
			if l.peek(0) == '&' {
				l.i++
			}
			endCmd()
		case c == '&' && l.peek(1) != '>':
			l.i++
			endPipeline()
		case c == '#' && l.atWordStart():
			for l.i < len(l.s) && l.s[l.i] != '\n' {
				l.i++
			}
		case (c == '<' || c == '>') && l.peek(1) == '(':
			cur.words = append(cur.words, l.word())
		case l.redirectAhead():
			cur.redirects = append(cur.redirects, l.redirect())
		default:
			cur.words = append(cur.words, l.word())
		}
	}
	endPipeline()
	return out
}

func (l *lexer) peek(off int) byte {
	if l.i+off < len(l.s) {
		return l.s[l.i+off]
	}
	return 0
}

func (l *lexer) atWordStart() bool {
	return l.i == 0 || strings.IndexByte(" \t\n;&|()", l.s[l.i-1]) >= 0
}

// redirectAhead reports whether a redirection operator starts here: [n]> [n]< &>.
func (l *lexer) redirectAhead() bool {
	j := l.i
	for j < len(l.s) && l.s[j] >= '0' && l.s[j] <= '9' {
		j++
	}
	if j < len(l.s) && (l.s[j] == '<' || l.s[j] == '>') {
		return true
	}
	return j == l.i && l.s[j] == '&' && j+1 < len(l.s) && l.s[j+1] == '>'
}

func (l *lexer) redirect() redirect {
	for l.i < len(l.s) && l.s[l.i] >= '0' && l.s[l.i] <= '9' {
		l.i++
	}
	start := l.i
	if l.s[l.i] == '&' {
		l.i++
	}
	l.i++ // < or >
	for l.i < len(l.s) && strings.IndexByte("<>&|", l.s[l.i]) >= 0 && l.i-start < 3 {
		l.i++
	}
	r := redirect{op: l.s[start:l.i]}
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t') {
		l.i++
	}
	if strings.HasSuffix(r.op, "&") && r.op != "&" {
		// >&2, <&0, >&-: descriptor duplication (or close); no file involved.
		if l.i < len(l.s) && (l.s[l.i] == '-' || (l.s[l.i] >= '0' && l.s[l.i] <= '9')) {
			r.dup = true
			r.target = l.word()
			return r
		}
		r.op = strings.TrimSuffix(r.op, "&")
	}
	if l.i < len(l.s) && strings.IndexByte("\n;&|()<>", l.s[l.i]) < 0 {
		r.target = l.word()
	}
	return r
}

// word reads one word, removing quotes and capturing substitutions.
func (l *lexer) word() word {
	var w word
	var sb strings.Builder
	if c := l.s[l.i]; (c == '<' || c == '>') && l.peek(1) == '(' {
		l.i++
		inner := l.balanced()
		w.subs = append(w.subs, inner)
		w.expands = true
		sb.WriteString(string(c) + "(...)")
	}
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case strings.IndexByte(" \t\r\n;&|()<>", c) >= 0:
			w.text = sb.String()
			return w
		case c == '\\':
			if l.i+1 < len(l.s) {
				if l.s[l.i+1] != '\n' {
					sb.WriteByte(l.s[l.i+1])
				}
				l.i += 2
			} else {
				l.i++
			}
		case c == '\'':
			w.quoted = true
			end := strings.IndexByte(l.s[l.i+1:], '\'')
			if end < 0 {
				sb.WriteString(l.s[l.i+1:])
				l.i = len(l.s)
			} else {
				sb.WriteString(l.s[l.i+1 : l.i+1+end])
				l.i += end + 2
			}
		case c == '"':
			w.quoted = true
			l.i++
			l.doubleQuoted(&w, &sb)
		case c == '$' || c == '`':
			l.dollar(&w, &sb)
		default:
			sb.WriteByte(c)
			l.i++
		}
	}
	w.text = sb.String()
	return w
}

func (l *lexer) doubleQuoted(w *word, sb *strings.Builder) {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == '"':
			l.i++
			return
		case c == '\\' && l.i+1 < len(l.s) && strings.IndexByte("$`\"\\\n", l.s[l.i+1]) >= 0:
			if l.s[l.i+1] != '\n' {
				sb.WriteByte(l.s[l.i+1])
			}
			l.i += 2
		case c == '$' || c == '`':
			l.dollar(w, sb)
		default:
			sb.WriteByte(c)
			l.i++
		}
	}
}

// dollar reads $(...), `...`, $((...)), ${...}, $NAME or a lone $.
func (l *lexer) dollar(w *word, sb *strings.Builder) {
	if l.s[l.i] == '`' {
		end := strings.IndexByte(l.s[l.i+1:], '`')
		var inner string
		if end < 0 {
			inner, l.i = l.s[l.i+1:], len(l.s)
		} else {
			inner = l.s[l.i+1 : l.i+1+end]
			l.i += end + 2
		}
		w.subs = append(w.subs, inner)
		w.expands = true
		sb.WriteString("$(...)")
		return
	}
	switch next := l.peek(1); {
	case next == '(' && l.peek(2) == '(': // arithmetic: a number, no command
		l.i++
		sb.WriteString("$(" + l.balanced() + ")")
		w.expands = true
	case next == '(':
		l.i++
		w.subs = append(w.subs, l.balanced())
		w.expands = true
		sb.WriteString("$(...)")
	case next == '{':
		end := strings.IndexByte(l.s[l.i:], '}')
		if end < 0 {
			end = len(l.s) - l.i - 1
		}
		sb.WriteString(l.s[l.i : l.i+end+1])
		l.i += end + 1
		w.expands = true
	case next == '_' || next == '?' || next == '@' || next == '*' || next == '#' || next == '$' || next == '!' ||
		(next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') || (next >= '0' && next <= '9'):
		start := l.i
		l.i += 2
		if isNameByte(next) && !(next >= '0' && next <= '9') {
			for l.i < len(l.s) && isNameByte(l.s[l.i]) {
				l.i++
			}
		}
		sb.WriteString(l.s[start:l.i])
		w.expands = true
	default:
		sb.WriteByte('$')
		l.i++
	}
}

func isNameByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// balanced reads from an opening parenthesis at l.i to its match and returns what lies
// between, honouring quotes.
func (l *lexer) balanced() string {
	start := l.i + 1
	depth := 0
	for l.i < len(l.s) {
		switch l.s[l.i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				inner := l.s[start:l.i]
				l.i++
				return inner
			}
		case '\\':
			l.i++
		case '\'':
			if end := strings.IndexByte(l.s[l.i+1:], '\''); end >= 0 {
				l.i += end + 1
			}
		case '"':
			for l.i++; l.i < len(l.s) && l.s[l.i] != '"'; l.i++ {
				if l.s[l.i] == '\\' {
					l.i++
				}
			}
		}
		l.i++
	}
	return l.s[min(start, len(l.s)):]
}
