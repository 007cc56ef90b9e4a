package mcp

import (
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agenticd/agenticd/presenters"
)

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestQualifiedNamesAreValidFunctionNames(t *testing.T) {
	taken := map[string]bool{}
	long := strings.Repeat("x", 80)
	cases := []struct{ server, tool, want string }{
		{"kb", "lookup", "kb__lookup"},
		{"kb", "files/read.v2", "kb__files_read_v2"},
		{"kb", "files.read_v2", ""}, // the same after replacing: made unique
		{"kb", long, ""},
		{"kb", long + "y", ""}, // the same after cutting: made unique
	}
	for _, c := range cases {
		got := qualifiedName(c.server, c.tool, taken)
		if !functionName.MatchString(got) || taken[got] || (c.want != "" && got != c.want) {
			t.Errorf("qualifiedName(%q, %q) = %q (taken before: %v)", c.server, c.tool, got, taken[got])
		}
		taken[got] = true
	}
}

func TestMergeLetsSessionServersReplaceConfiguredOnes(t *testing.T) {
	got := Merge(
		[]presenters.MCPServer{{Name: "a", Command: "conf-a"}, {Name: "b", Command: "conf-b"}},
		[]presenters.MCPServer{{Name: "b", URL: "http://own"}, {Name: "c", Command: "own-c"}})
	want := []Server{{MCPServer: presenters.MCPServer{Name: "a", Command: "conf-a"}, Configured: true},
		{MCPServer: presenters.MCPServer{Name: "b", URL: "http://own"}}, {MCPServer: presenters.MCPServer{Name: "c", Command: "own-c"}}}
	if len(got) != len(want) {
		t.Fatalf("Merge = %+v", got)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Command != want[i].Command || got[i].URL != want[i].URL || got[i].Configured != want[i].Configured {
			t.Errorf("Merge[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestHintsApplyTheProtocolDefaults(t *testing.T) {
	no, yes := false, true
	cases := []struct {
		name string
		in   *sdk.ToolAnnotations
		want Hints
	}{
		{"none", nil, Hints{}},
		{"empty: destructive, open world", &sdk.ToolAnnotations{}, Hints{Annotated: true, Destructive: true, OpenWorld: true}},
		{"read-only is never destructive", &sdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, Hints{Annotated: true, ReadOnly: true, OpenWorld: true}},
		{"additive, closed world", &sdk.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}, Hints{Annotated: true}},
	}
	for _, c := range cases {
		if got := hintsOf(c.in); got != c.want {
			t.Errorf("%s: hintsOf = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestResultContentForClientsAndModel(t *testing.T) {
	res := resultOf(&sdk.CallToolResult{IsError: true, Content: []sdk.Content{
		&sdk.ResourceLink{URI: "file:///a.txt", Name: "a"},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://blob", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://note", MIMEType: "text/plain", Text: "hello"}},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "ui://form", MIMEType: "text/html", Text: "<form>"}},
	}})
	if !res.IsError || len(res.Content) != 3 || len(res.UIResources) != 1 {
		t.Fatalf("result = %+v", res)
	}
	if r := res.Content[1].Resource; r == nil || r.Blob != "AQID" || r.Text != "" {
		t.Errorf("binary resource = %+v", r)
	}
	if ui := res.UIResources[0]; ui.URI != "ui://form" || ui.Text != "<form>" {
		t.Errorf("UI resource = %+v", ui)
	}
	for _, want := range []string{"a (file:///a.txt)", "mem://blob", "3 bytes", "hello", "ui://form"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("the model's text %q lacks %q", res.Text, want)
		}
	}
	structured := resultOf(&sdk.CallToolResult{StructuredContent: map[string]int{"n": 1}})
	if structured.Text != `{"n":1}` {
		t.Errorf("structured result text = %q", structured.Text)
	}
}
