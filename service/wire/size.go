package wire

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MaxEventBytes is the most one encoded event, or one message in a GetMessages response,
// or a whole GetMessages response, may take. gRPC clients refuse messages over 4 MiB by
// default, and their refusal (RESOURCE_EXHAUSTED "received message larger than max")
// would look like a slow subscriber's, so the server never sends one: an event or message
// over this cap goes out with its largest texts cut (FitWithin), and 64 KiB stay free
// for the framing.
const MaxEventBytes = 4<<20 - 64<<10

// truncationSlack is how much more than the excess a cut takes off a string, so that the
// marker fits in its place ("[truncated: 18446744073709551615 bytes]" is 40 bytes).
const truncationSlack = 64

// FitWithin cuts the largest strings of m, in place, until m encodes in at most limit
// bytes. Each cut string keeps its beginning, up to a UTF-8 boundary, followed by
// "[truncated: N bytes]" (N = the bytes removed). It reports false when cutting every
// string longer than the marker is not enough (m is then partly cut).
func FitWithin(m proto.Message, limit int) bool {
	size := proto.Size(m)
	if size <= limit {
		return true
	}
	strs := stringsOf(m.ProtoReflect(), nil)
	slices.SortFunc(strs, func(a, b stringField) int { return len(b.value) - len(a.value) })
	for _, s := range strs {
		if len(s.value) <= truncationSlack {
			return false
		}
		keep := max(len(s.value)-(size-limit)-truncationSlack, 0)
		for keep > 0 && !utf8.RuneStart(s.value[keep]) {
			keep--
		}
		cut := s.value[:keep] + fmt.Sprintf("[truncated: %d bytes]", len(s.value)-keep)
		s.set(cut)
		// The encoding shrinks by at least what the string lost (length prefixes only
		// shrink with it), so size stays an upper bound without encoding again.
		if size -= len(s.value) - len(cut); size <= limit {
			return true
		}
	}
	return false
}

// stringField is one string in a message tree and the way to replace it.
type stringField struct {
	value string
	set   func(string)
}

// stringsOf appends every string value in m and the messages below it (singular,
// repeated and map values; map keys stay) to out.
func stringsOf(m protoreflect.Message, out []stringField) []stringField {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			list := v.List()
			for i := range list.Len() {
				if fd.Kind() == protoreflect.StringKind {
					out = append(out, stringField{list.Get(i).String(), func(s string) { list.Set(i, protoreflect.ValueOfString(s)) }})
				} else if fd.Message() != nil {
					out = stringsOf(list.Get(i).Message(), out)
				}
			}
		case fd.IsMap():
			mp := v.Map()
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.StringKind {
					out = append(out, stringField{mv.String(), func(s string) { mp.Set(k, protoreflect.ValueOfString(s)) }})
				} else if fd.MapValue().Message() != nil {
					out = stringsOf(mv.Message(), out)
				}
				return true
			})
		case fd.Kind() == protoreflect.StringKind:
			out = append(out, stringField{v.String(), func(s string) { m.Set(fd, protoreflect.ValueOfString(s)) }})
		case fd.Message() != nil:
			out = stringsOf(v.Message(), out)
		}
		return true
	})
	return out
}
