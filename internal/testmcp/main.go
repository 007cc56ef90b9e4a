// Command testmcp is a small MCP server over stdio for tests. Its tools:
//
//   - lookup (read-only): answers "found <key>"
//   - delete_item (destructive): answers "deleted <id>"
//   - add_note (neither read-only nor destructive): answers "noted <text>"
//   - plain (no annotations): answers "plain"
//   - chart: an image (a 1x1 PNG), a ui:// resource and a text
//   - write_file: writes content to path (relative to its working directory, or
//     absolute) and answers "wrote <path>", or the error as a tool error
//   - crash: writes "crashing" to stderr and exits with status 3 without answering
//   - grow: adds the tool "late" (answers "late"), which announces a new tool list
//
// At start it writes "testmcp ready <pid>" to stderr, and its pid to the file named
// by TESTMCP_PID_FILE when set.
package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// onePixelPNG is a 1x1 transparent PNG.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

func main() {
	fmt.Fprintf(os.Stderr, "testmcp ready %d\n", os.Getpid())
	if f := os.Getenv("TESTMCP_PID_FILE"); f != "" {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "testmcp", Version: "1"}, nil)
	no := false

	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Look a key up", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Key string `json:"key"`
		}) (*mcp.CallToolResult, any, error) {
			return text("found " + in.Key), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_item", Description: "Delete an item", Annotations: &mcp.ToolAnnotations{}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			ID string `json:"id"`
		}) (*mcp.CallToolResult, any, error) {
			return text("deleted " + in.ID), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_note", Description: "Add a note", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			return text("noted " + in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "plain", Description: "A tool without annotations"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return text("plain"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "chart", Description: "Draw a chart", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			png, _ := base64.StdEncoding.DecodeString(onePixelPNG)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.ImageContent{MIMEType: "image/png", Data: png},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "ui://chart/1", MIMEType: "text/html", Text: "<p>chart</p>"}},
				&mcp.TextContent{Text: "chart drawn"},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write a file"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(in.Path, []byte(in.Content), 0o644); err != nil {
				r := text(err.Error())
				r.IsError = true
				return r, nil, nil
			}
			return text("wrote " + in.Path), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit at once"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "crashing")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Add the tool late"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "late", Description: "Added later", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
					return text("late"), nil, nil
				})
			return text("grown"), nil, nil
		})

	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
