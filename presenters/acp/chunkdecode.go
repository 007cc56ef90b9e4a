package acp

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"
)

// Text chunks are nearly every line of a burst, and the SDK's generic
// decoding of one costs about eight scans and four copies of the line: the envelope,
// then SessionUpdate and ContentBlock each decode into a map to find their
// discriminator and decode again into the variant; even one encoding/json pass into a
// narrow struct was most of agenticd's CPU in a flood. decodeTextChunk scans a plain
// text chunk once and builds the same sdk.SessionNotification.
//
// It must never accept a line the SDK would read differently, so it is stricter than
// the SDK and gives up (ok false: decode the SDK's way) on anything unusual: invalid
// JSON anywhere in the line, an id other than null, a key repeated or spelled in
// another case than the schema's (encoding/json matches struct fields
// case-insensitively, the SDK's discriminators exactly), a key with escapes or
// non-ASCII letters, _meta or annotations (the SDK keeps them), content other than
// text, or nesting deeper than maxChunkDepth. FuzzDecodeTextChunk checks the result
// against the SDK's decoding.

const (
	updateAgentMessageChunk = "agent_message_chunk"
	updateAgentThoughtChunk = "agent_thought_chunk"
	updateUserMessageChunk  = "user_message_chunk"

	maxChunkDepth = 32
)

// The objects of a chunk line and their keys as the schema spells them. Keys that
// decodeTextChunk refuses to handle (_meta, annotations) are listed so that they, and
// their case variants, are recognised.
const (
	levelLine = iota
	levelParams
	levelUpdate
	levelContent
)

var chunkKeys = [...][]string{
	levelLine:    {"jsonrpc", "id", "method", "params"},
	levelParams:  {"sessionId", "update", "_meta"},
	levelUpdate:  {"sessionUpdate", "messageId", "content", "_meta"},
	levelContent: {"type", "text", "annotations", "_meta"},
}

// chunkFields are what a chunk line says.
type chunkFields struct {
	method, sessionID, kind, contentType, text string
	messageID                                  *string
	seen                                       [len(chunkKeys)]bool // the object at each level was read
}

// decodeTextChunk decodes line if it is a plain text chunk notification; ok is false
// for every other line, which must then be decoded the SDK's way. lastSessionID, when
// equal, is reused instead of allocating the same id again for every chunk.
func decodeTextChunk(line []byte, lastSessionID string) (n sdk.SessionNotification, ok bool) {
	d := chunkScanner{buf: line, lastSessionID: lastSessionID}
	var f chunkFields
	if !d.object(levelLine, &f) || !d.end() || !f.seen[levelParams] || !f.seen[levelUpdate] || !f.seen[levelContent] ||
		f.method != sdk.ClientMethodSessionUpdate || f.contentType != "text" {
		return sdk.SessionNotification{}, false
	}
	content := sdk.ContentBlock{Text: &sdk.ContentBlockText{Type: f.contentType, Text: f.text}}
	n.SessionId = sdk.SessionId(f.sessionID)
	switch f.kind {
	case updateAgentMessageChunk:
		n.Update.AgentMessageChunk = &sdk.SessionUpdateAgentMessageChunk{Content: content, MessageId: f.messageID, SessionUpdate: f.kind}
	case updateAgentThoughtChunk:
		n.Update.AgentThoughtChunk = &sdk.SessionUpdateAgentThoughtChunk{Content: content, MessageId: f.messageID, SessionUpdate: f.kind}
	case updateUserMessageChunk:
		n.Update.UserMessageChunk = &sdk.SessionUpdateUserMessageChunk{Content: content, MessageId: f.messageID, SessionUpdate: f.kind}
	default:
		return sdk.SessionNotification{}, false
	}
	return n, true
}

// member reads the value of the known key at level into f.
func (d *chunkScanner) member(level int, key string, f *chunkFields) bool {
	switch level {
	case levelLine:
		switch key {
		case "id":
			return d.literal("null")
		case "method":
			return d.enum(&f.method, sdk.ClientMethodSessionUpdate)
		case "params":
			return d.object(levelParams, f)
		}
		return d.skipValue(1) // jsonrpc: any value, as the SDK ignores it
	case levelParams:
		switch key {
		case "sessionId":
			return d.sessionID(&f.sessionID)
		case "update":
			return d.object(levelUpdate, f)
		}
	case levelUpdate:
		switch key {
		case "sessionUpdate":
			return d.enum(&f.kind, updateAgentMessageChunk, updateAgentThoughtChunk, updateUserMessageChunk)
		case "messageId":
			if d.peek() == 'n' {
				f.messageID = nil
				return d.literal("null")
			}
			id := new(string)
			f.messageID = id
			return d.str(id)
		case "content":
			return d.object(levelContent, f)
		}
	case levelContent:
		switch key {
		case "type":
			return d.enum(&f.contentType, "text")
		case "text":
			return d.nullableStr(&f.text)
		}
	}
	return false // _meta, annotations
}

// chunkScanner reads one JSON value strictly (RFC 8259, as encoding/json does) from buf.
type chunkScanner struct {
	buf           []byte
	pos           int
	lastSessionID string
}

func (d *chunkScanner) space() {
	for d.pos < len(d.buf) {
		switch d.buf[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// end reports whether only whitespace is left.
func (d *chunkScanner) end() bool {
	d.space()
	return d.pos == len(d.buf)
}

func (d *chunkScanner) peek() byte {
	d.space()
	if d.pos < len(d.buf) {
		return d.buf[d.pos]
	}
	return 0
}

func (d *chunkScanner) literal(word string) bool {
	d.space()
	if len(d.buf)-d.pos < len(word) || string(d.buf[d.pos:d.pos+len(word)]) != word {
		return false
	}
	d.pos += len(word)
	return true
}

// object reads the object at level, handing the members whose keys the schema has
// there to member, once each, and skipping the others' values. A key that differs from
// a known one only in case, or that has escapes or non-ASCII bytes, fails.
func (d *chunkScanner) object(level int, f *chunkFields) bool {
	if level > maxChunkDepth || d.peek() != '{' {
		return false
	}
	d.pos++
	f.seen[level] = true
	var seen uint8 // bit i: known[i] was read
	if d.peek() == '}' {
		d.pos++
		return true
	}
	known := chunkKeys[level]
	for {
		key, ok := d.plainKey()
		if !ok || d.peek() != ':' {
			return false
		}
		d.pos++
		handled := false
		for i, k := range known {
			if string(key) == k {
				if seen&(1<<i) != 0 || !d.member(level, k, f) {
					return false
				}
				seen |= 1 << i
				handled = true
				break
			}
			if bytes.EqualFold(key, []byte(k)) {
				return false
			}
		}
		if !handled && !d.skipValue(level+1) {
			return false
		}
		if more, ok := d.separator('}'); !more {
			return ok
		}
	}
}

// separator reads what follows a member or element: a comma (more follow) or the closer
// (the object or array is done, ok). Anything else is malformed: neither more nor ok.
func (d *chunkScanner) separator(closer byte) (more, ok bool) {
	switch d.peek() {
	case ',':
		d.pos++
		return true, true
	case closer:
		d.pos++
		return false, true
	}
	return false, false
}

// plainKey reads a key made of printable ASCII without escapes.
func (d *chunkScanner) plainKey() ([]byte, bool) {
	if d.peek() != '"' {
		return nil, false
	}
	start := d.pos + 1
	for i := start; i < len(d.buf); i++ {
		switch c := d.buf[i]; {
		case c == '"':
			d.pos = i + 1
			return d.buf[start:i], true
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return nil, false
		}
	}
	return nil, false
}

// enum reads a string that must be one of values, without escapes, and sets out to it
// (the constant, so nothing is allocated); any other string fails.
func (d *chunkScanner) enum(out *string, values ...string) bool {
	if d.peek() != '"' {
		return false
	}
	raw, plain, ok := d.stringToken()
	if !ok || !plain {
		return false
	}
	for _, v := range values {
		if string(raw[1:len(raw)-1]) == v {
			*out = v
			return true
		}
	}
	return false
}

// str reads a string (not null).
func (d *chunkScanner) str(out *string) bool {
	if d.peek() != '"' {
		return false
	}
	raw, plain, ok := d.stringToken()
	if !ok {
		return false
	}
	if plain {
		*out = string(raw[1 : len(raw)-1])
		return true
	}
	// Escapes or invalid UTF-8: encoding/json's own unquoting, so that replacement
	// characters and surrogate handling are exactly the SDK's.
	return json.Unmarshal(raw, out) == nil
}

// sessionID reads a nullable string, reusing lastSessionID when it is the same.
func (d *chunkScanner) sessionID(out *string) bool {
	if d.peek() == '"' && d.lastSessionID != "" {
		start := d.pos
		raw, plain, ok := d.stringToken()
		if ok && plain && string(raw[1:len(raw)-1]) == d.lastSessionID {
			*out = d.lastSessionID
			return true
		}
		d.pos = start
	}
	return d.nullableStr(out)
}

// nullableStr reads a string, or null as "" (what encoding/json leaves in a string field).
func (d *chunkScanner) nullableStr(out *string) bool {
	if d.peek() == 'n' {
		return d.literal("null")
	}
	return d.str(out)
}

// stringToken reads a string token, quotes included; plain is true when it has no
// escapes and is valid UTF-8, so that its bytes are its value.
func (d *chunkScanner) stringToken() (raw []byte, plain, ok bool) {
	start := d.pos
	plain = true
	ascii := true
	for i := start + 1; i < len(d.buf); i++ {
		c := d.buf[i]
		switch {
		case c == '"':
			d.pos = i + 1
			raw = d.buf[start:d.pos]
			if !ascii && plain {
				plain = utf8.Valid(raw)
			}
			return raw, plain, true
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			ascii = false
		case c == '\\':
			plain = false
			i++
			if i >= len(d.buf) {
				return nil, false, false
			}
			switch d.buf[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(d.buf) {
					return nil, false, false
				}
				for _, h := range d.buf[i+1 : i+5] {
					if !isHex(h) {
						return nil, false, false
					}
				}
				i += 4
			default:
				return nil, false, false
			}
		}
	}
	return nil, false, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipValue reads any value, checking it is valid JSON.
func (d *chunkScanner) skipValue(depth int) bool {
	if depth > maxChunkDepth {
		return false
	}
	switch c := d.peek(); {
	case c == '"':
		_, _, ok := d.stringToken()
		return ok
	case c == '{':
		d.pos++
		if d.peek() == '}' {
			d.pos++
			return true
		}
		for {
			if d.peek() != '"' {
				return false
			}
			if _, _, ok := d.stringToken(); !ok || d.peek() != ':' {
				return false
			}
			d.pos++
			if !d.skipValue(depth + 1) {
				return false
			}
			if more, ok := d.separator('}'); !more {
				return ok
			}
		}
	case c == '[':
		d.pos++
		if d.peek() == ']' {
			d.pos++
			return true
		}
		for {
			if !d.skipValue(depth + 1) {
				return false
			}
			if more, ok := d.separator(']'); !more {
				return ok
			}
		}
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return false
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *chunkScanner) number() bool {
	b, i := d.buf, d.pos
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	d.pos = i
	return true
}
