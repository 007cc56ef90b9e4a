package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// responsesTools is what a Responses API request offers the model, by the names the plan
// uses: a namespace's tools (codex puts each MCP server's in one) as namespace__tool.
type responsesTools struct {
	names      []string
	namespaces map[string][2]string // joined name: namespace, tool
	custom     map[string]bool      // freeform tools, which take text
	search     bool                 // a tool_search the client runs
}

func (rt *responsesTools) add(tools []any) {
	for _, x := range tools {
		t, _ := x.(map[string]any)
		name, _ := t["name"].(string)
		switch t["type"] {
		case "tool_search":
			rt.search = rt.search || t["execution"] == "client"
		case "namespace":
			inner, _ := t["tools"].([]any)
			for _, y := range inner {
				tool, _ := y.(map[string]any)
				if short, _ := tool["name"].(string); short != "" {
					rt.names = append(rt.names, name+"__"+short)
					rt.namespaces[name+"__"+short] = [2]string{name, short}
				}
			}
		default:
			if name != "" {
				rt.names = append(rt.names, name)
				rt.custom[name] = t["type"] == "custom"
			}
		}
	}
}

// responsesFake is the OpenAI Responses API (POST /v1/responses, streamed as SSE) as
// codex calls it; other endpoints get an empty list. Codex defers MCP tools behind a
// tool_search it runs itself: the fake searches first when the tool it wants is not
// offered yet.
func responsesFake(a realAgent, f *fakeModel) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.seen(r, body)
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
			writeJSON(w, map[string]any{"object": "list", "data": []any{}, "models": []any{}})
			return
		}
		var req struct {
			Model string           `json:"model"`
			Input []map[string]any `json:"input"`
			Tools []any            `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tools := responsesTools{namespaces: map[string][2]string{}, custom: map[string]bool{}}
		tools.add(req.Tools)
		// Whichever comes last in the input, a marked prompt or a tool's result, decides;
		// tools a search found since the prompt are offered too.
		var prompt string
		toolResult, searched := false, false
		var found []any
		for _, item := range req.Input {
			switch item["type"] {
			case "message":
				if item["role"] != "user" {
					continue
				}
				parts, _ := item["content"].([]any)
				for _, p := range parts {
					part, _ := p.(map[string]any)
					if s, _ := part["text"].(string); strings.Contains(s, "REALAGENT-") {
						prompt, toolResult, searched, found = s, false, false, nil
					}
				}
			case "tool_search_output":
				more, _ := item["tools"].([]any)
				found, searched = append(found, more...), true
			case "function_call_output", "custom_tool_call_output":
				id, _ := item["call_id"].(string)
				text, _ := json.Marshal(item["output"])
				f.result(id, string(text))
				toolResult = true
			}
		}
		tools.add(found)
		p := plan{text: "OK."}
		if len(tools.names) > 0 {
			p = planFor(a, prompt, toolResult, tools.names)
		}
		var item map[string]any
		switch {
		case strings.Contains(prompt, markMCP) && p.tool == "" && tools.search && !searched && !toolResult:
			item = map[string]any{"type": "tool_search_call", "id": "ts_" + uuid.NewString()[:8], "call_id": f.call("tool_search"),
				"execution": "client", "status": "completed", "arguments": map[string]any{"query": "echo", "limit": 5}}
		case p.tool != "" && tools.custom[p.tool]:
			input, _ := p.toolArgs["input"].(string)
			item = map[string]any{"type": "custom_tool_call", "id": "ctc_" + uuid.NewString()[:8], "call_id": f.call(p.tool),
				"name": p.tool, "input": input}
		case p.tool != "":
			args, _ := json.Marshal(p.toolArgs)
			item = map[string]any{"type": "function_call", "id": "fc_" + uuid.NewString()[:8], "call_id": f.call(p.tool),
				"name": p.tool, "arguments": string(args)}
			if ns, ok := tools.namespaces[p.tool]; ok {
				item["namespace"], item["name"] = ns[0], ns[1]
			}
		default:
			item = map[string]any{"type": "message", "role": "assistant", "id": "msg_" + uuid.NewString()[:8],
				"content": []any{map[string]any{"type": "output_text", "text": p.text, "annotations": []any{}}}}
		}
		id := "resp_" + uuid.NewString()[:8]
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(name string, data map[string]any) {
			data["type"] = name
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		}
		event("response.created", map[string]any{"response": map[string]any{"id": id, "model": req.Model}})
		event("response.output_item.added", map[string]any{"output_index": 0, "item": item})
		if item["type"] == "message" {
			event("response.output_text.delta", map[string]any{"output_index": 0, "content_index": 0, "item_id": item["id"], "delta": p.text})
		}
		event("response.output_item.done", map[string]any{"output_index": 0, "item": item})
		event("response.completed", map[string]any{"response": map[string]any{"id": id, "model": req.Model,
			"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}}})
	})
}

// chatFake is an OpenAI-compatible chat completions API (POST /v1/chat/completions,
// streamed as SSE when asked), as qwen-code calls it through OPENAI_BASE_URL; other
// endpoints get a model list.
func chatFake(a realAgent, f *fakeModel) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.seen(r, body)
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": "fake-model", "object": "model"}}})
			return
		}
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role       string          `json:"role"`
				Content    json.RawMessage `json:"content"`
				ToolCallID string          `json:"tool_call_id"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
			ResponseFormat any `json:"response_format"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var tools []string
		for _, t := range req.Tools {
			tools = append(tools, t.Function.Name)
		}
		// Whichever comes last, a marked prompt or a tool's result, decides; a search's
		// result offers the tools it found. A plain user message right after the
		// assistant's answer is the agent's own side request (a title, a suggestion).
		var prompt, found string
		toolResult, searched := false, false
		for i, m := range req.Messages {
			text := string(m.Content)
			var str string
			var parts []struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(m.Content, &str) == nil {
				text = str
			} else if json.Unmarshal(m.Content, &parts) == nil {
				text = ""
				for _, part := range parts {
					text += part.Text
				}
			}
			switch m.Role {
			case "user":
				if strings.Contains(text, "REALAGENT-") {
					prompt, toolResult, searched, found = text, false, false, ""
				} else if i == len(req.Messages)-1 && i > 0 && req.Messages[i-1].Role == "assistant" {
					prompt = ""
				}
			case "tool":
				if f.toolOf(m.ToolCallID) == "tool_search" {
					found, searched = text, true
					continue
				}
				f.result(m.ToolCallID, text)
				toolResult = true
			}
		}
		// qwen-code defers MCP tools behind tool_search, and the model calls one it
		// found through the tool_call bridge.
		deferred := map[string]bool{}
		for _, m := range regexp.MustCompile(`"name":\s*"([^"]+)"`).FindAllStringSubmatch(found, -1) {
			if !slices.Contains(tools, m[1]) {
				deferred[m[1]] = true
				tools = append(tools, m[1])
			}
		}
		p := plan{text: "OK."}
		switch {
		case req.ResponseFormat != nil:
			// qwen-code's own checks (who speaks next) want JSON.
			p = plan{text: `{"next_speaker": "user", "reasoning": "the model answered"}`}
		case len(tools) > 0:
			p = planFor(a, prompt, toolResult, tools)
			if strings.Contains(prompt, markMCP) && p.tool == "" && !toolResult && !searched && slices.Contains(tools, "tool_search") {
				p = plan{tool: "tool_search", toolArgs: map[string]any{"query": "echo"}}
			}
		}
		delta := map[string]any{"role": "assistant", "content": p.text}
		finish := "stop"
		if p.tool != "" {
			name, toolArgs := p.tool, p.toolArgs
			if deferred[name] {
				name, toolArgs = "tool_call", map[string]any{"name": p.tool, "arguments": p.toolArgs}
			}
			args, _ := json.Marshal(toolArgs)
			delta = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"index": 0, "id": f.call(p.tool), "type": "function",
				"function": map[string]any{"name": name, "arguments": string(args)}}}}
			finish = "tool_calls"
		}
		usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
		if !req.Stream {
			writeJSON(w, map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "message": delta, "finish_reason": finish}}, "usage": usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []map[string]any{
			{"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}},
			{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, "usage": usage},
		} {
			c["id"], c["object"], c["created"], c["model"] = "chatcmpl-fake", "chat.completion.chunk", 0, req.Model
			b, _ := json.Marshal(c)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
}
