// Package strictyaml decodes YAML into a Go value as yaml.v3 does, after checking every
// key and value against the value's type the way yaml.v3 will decode it, so that what
// would not decode, or would be ignored, is worded for a person: the line, the key's
// path, the nearest known key for an unknown one, the expected shape.
package strictyaml

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Decode checks data against v's type (a pointer to a struct with yaml tags) and decodes
// it into v. Errors start with what (e.g. "config /etc/agenticd.yaml"). It returns the
// document's root node, nil for an empty document, for callers that want its lines.
func Decode(what string, data []byte, v any) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s is not valid YAML: %s", what, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if problems := check(root, reflect.TypeOf(v).Elem(), ""); len(problems) > 0 {
		return root, problemsError(what, problems)
	}
	if err := root.Decode(v); err != nil {
		// check admits only what decodes; this is a last resort, worded alike.
		return root, fmt.Errorf("%s: %s", what, withoutGoTypes(err.Error()))
	}
	return root, nil
}

// A problem is one thing wrong in a document, at a line of it.
type problem struct {
	line int
	text string
}

// maxProblems bounds one error's list: the first few are enough to start fixing.
const maxProblems = 10

func problemsError(what string, problems []problem) error {
	if len(problems) == 1 {
		return fmt.Errorf("%s: %s", what, problems[0].text)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s has %d problems:", what, len(problems))
	for i, p := range problems {
		if i == maxProblems {
			fmt.Fprintf(&b, "\n  ... and %d more", len(problems)-i)
			break
		}
		b.WriteString("\n  " + p.text)
	}
	return errors.New(b.String())
}

var durationType = reflect.TypeFor[time.Duration]()

// check walks a YAML node against the type it will decode into, the way yaml.v3
// will, and words what would not decode: unknown keys (with the nearest known key),
// durations without a unit, and values of the wrong shape. path names the node for
// messages ("" at the top, then "tls", "agents[0]", "agents[0].args"...).
func check(n *yaml.Node, t reflect.Type, path string) []problem {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // an empty setting is an unset one
	}
	wrong := func(got string) []problem {
		if path == "" {
			return []problem{{n.Line, fmt.Sprintf("the file must hold %s, not %s (line %d)", describeType(t), got, n.Line)}}
		}
		return []problem{{n.Line, fmt.Sprintf("key `%s` at line %d: expected %s, not %s", path, n.Line, describeType(t), got)}}
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode {
			return wrong(describeNode(n))
		}
		// A bare number is refused even where Go would parse it ("0"): YAML reads it as
		// a number, not a duration.
		if _, err := strconv.ParseFloat(n.Value, 64); err == nil || n.Tag == "!!int" || n.Tag == "!!float" {
			return []problem{{n.Line, fmt.Sprintf("key `%s` at line %d: %s has no unit; write %ss (a duration needs one: 90s, 5m, 1h30m)", path, n.Line, n.Value, n.Value)}}
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			return []problem{{n.Line, fmt.Sprintf("key `%s` at line %d: %q is not a duration; write it like 30s, 5m or 1h30m", path, n.Line, n.Value)}}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return wrong(describeNode(n))
		}
		var problems []problem
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge key: its mapping's keys are this mapping's
				problems = append(problems, check(v, t, path)...)
				continue
			}
			field, ok := yamlField(t, k.Value)
			if !ok {
				problems = append(problems, unknownKey(k, t, path))
				continue
			}
			problems = append(problems, check(v, field.Type, joinPath(path, k.Value))...)
		}
		return problems
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return wrong(describeNode(n))
		}
		var problems []problem
		for i, item := range n.Content {
			problems = append(problems, check(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return problems
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return wrong(describeNode(n))
		}
		var problems []problem
		for i := 0; i+1 < len(n.Content); i += 2 {
			problems = append(problems, check(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value))...)
		}
		return problems
	case reflect.Pointer:
		return check(n, t.Elem(), path)
	default:
		if n.Kind != yaml.ScalarNode {
			return wrong(describeNode(n))
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return wrong(describeNode(n))
		}
		return nil
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlKeys are the keys a struct type accepts, in their order.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" && f.IsExported() {
			keys = append(keys, name)
		}
	}
	return keys
}

func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key && name != "-" && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func unknownKey(k *yaml.Node, t reflect.Type, path string) problem {
	where := ""
	if path != "" {
		where = " in " + path
	}
	known := yamlKeys(t)
	if near := nearestKey(k.Value, known); near != "" {
		return problem{k.Line, fmt.Sprintf("unknown key `%s` at line %d%s; did you mean `%s`?", k.Value, k.Line, where, near)}
	}
	return problem{k.Line, fmt.Sprintf("unknown key `%s` at line %d%s; the keys there are: %s", k.Value, k.Line, where, strings.Join(known, ", "))}
}

// nearestKey is the known key a typo most likely meant: the closest by edit distance
// (case, - and _ aside), if it is close enough to be a typo rather than another word.
func nearestKey(key string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	best, bestDist := "", -1
	for _, k := range known {
		if d := editDistance(norm(key), norm(k)); bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if bestDist < 0 || bestDist > max(2, len(key)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes: keys are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// describeType says what a setting of type t looks like in YAML.
func describeType(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 30s or 5m"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return describeType(t.Elem())
	case reflect.String:
		return "a single value"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list of " + describePlural(t.Elem())
	case reflect.Map:
		return "a mapping of names to " + describePlural(t.Elem())
	case reflect.Struct:
		return "a mapping of settings (" + someKeys(t) + ")"
	}
	return t.Kind().String()
}

func describePlural(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "strings"
	case reflect.Struct:
		return "entries, each a mapping of settings (" + someKeys(t) + ")"
	}
	return describeType(t) + "s"
}

// someKeys shows the first keys of a struct type as YAML, for an example.
func someKeys(t reflect.Type) string {
	keys := yamlKeys(t)
	shown := strings.Join(keys[:min(len(keys), 2)], ": ..., ") + ": ..."
	if len(keys) > 2 {
		shown += ", ..."
	}
	return shown
}

// describeNode says what a YAML node holds, for "expected X, not Y".
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// goTypeName matches the Go type yaml.v3 names in its errors ("into time.Duration",
// "in type daemon.Config").
var goTypeName = regexp.MustCompile(`\s+(?:into|in type)\s+[\w.\[\]*]+`)

func withoutGoTypes(msg string) string {
	return strings.TrimPrefix(goTypeName.ReplaceAllString(msg, ""), "yaml: ")
}
