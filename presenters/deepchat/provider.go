package deepchat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/presenters/textutil"
	"github.com/agenticd/agenticd/tracing/tracecontext"
)

// The OpenAI chat completions wire format, as far as agenticd uses it. OpenAI, Ollama,
// vLLM, LM Studio, OpenRouter and DeepSeek all accept it.

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []chatMessage  `json:"messages"`
	Tools         []toolDef      `json:"tools,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, a []contentPart, or nil (an assistant message with only tool calls).
	Content    any        `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolDef struct {
	Type     string      `json:"type"`
	Function functionDef `json:"function"`
}

type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type streamChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
			ToolCalls        []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
	Error *wireError `json:"error"`
}

// wireUsage is a provider's usage; a count the provider left out stays nil, so that
// it is not reported as zero.
type wireUsage struct {
	PromptTokens        *int64 `json:"prompt_tokens"`
	CompletionTokens    *int64 `json:"completion_tokens"`
	TotalTokens         *int64 `json:"total_tokens"`
	PromptCacheHit      *int64 `json:"prompt_cache_hit_tokens"` // DeepSeek
	PromptTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u wireUsage) usage() presenters.TokenUsage {
	out := presenters.TokenUsage{
		InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedInputTokens: u.PromptCacheHit,
	}
	if u.PromptTokens != nil && u.CompletionTokens != nil {
		out.ContextUsed = presenters.Reported(*u.PromptTokens + *u.CompletionTokens)
		if out.TotalTokens == nil {
			out.TotalTokens = out.ContextUsed
		}
	}
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil && (out.CachedInputTokens == nil || *d.CachedTokens > 0) {
		out.CachedInputTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

type wireError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

// providerError is a failed provider call. message is what clients see: what happened
// and what to do, naming the provider by host only. detail is for the server log: it
// may hold the whole base URL, addresses and Go errors, which clients must not see.
type providerError struct {
	code       string // ERROR event code, e.g. "provider_rate_limited"
	message    string
	detail     error         // nil when message says it all
	retryable  bool          // safe to repeat the request
	retryAfter time.Duration // from Retry-After, 0 when absent
}

func (e *providerError) Error() string { return e.message }

// logDetail is what the server log records about the failure.
func (e *providerError) logDetail() string {
	if e.detail == nil {
		return e.message
	}
	return e.message + ": " + e.detail.Error()
}

// streamHandler receives a streamed reply as it arrives.
type streamHandler struct {
	text      func(string)
	reasoning func(string)
}

// roundResult is what one streamed completion produced besides text.
type roundResult struct {
	toolCalls    []toolCall
	finishReason string
	usage        *presenters.TokenUsage
}

// providerClient calls one OpenAI-compatible endpoint.
type providerClient struct {
	http        *http.Client
	baseURL     string
	host        string // the base URL's host[:port], without credentials: what messages name
	apiKey      func() string
	idleTimeout time.Duration // no byte from the provider for this long fails the call
	maxRetries  int
	backoff     func(attempt int) time.Duration
	maxWait     time.Duration // longest Retry-After that is waited out
	// sleep waits between attempts; it returns early with ctx's error.
	sleep func(ctx context.Context, d time.Duration) error
}

// sleepContext waits for d or until ctx ends.
func sleepContext(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// maxProviderDetail bounds the provider's own words quoted in an error message.
const maxProviderDetail = 500

var errIdleTimeout = errors.New("provider idle timeout")

// stream sends req and streams the reply into h. Failures before anything was handed
// to h are retried when that is safe (rate limits, 5xx, connection errors, timeouts);
// once output was delivered a retry would duplicate it, so the error is returned.
func (c *providerClient) stream(ctx context.Context, req chatRequest, h streamHandler) (roundResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return roundResult{}, fmt.Errorf("encode provider request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		delivered := false
		res, err := c.once(ctx, body, h, &delivered)
		if err == nil {
			return res, nil
		}
		var pe *providerError
		if delivered || !errors.As(err, &pe) || !pe.retryable || attempt >= c.maxRetries || ctx.Err() != nil {
			return res, err
		}
		wait := c.backoff(attempt)
		if pe.retryAfter > 0 {
			if pe.retryAfter > c.maxWait {
				return res, err
			}
			wait = pe.retryAfter
		}
		if c.sleep(ctx, wait) != nil {
			return res, err
		}
	}
}

func (c *providerClient) once(parent context.Context, body []byte, h streamHandler, delivered *bool) (roundResult, error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	// One timer covers both waiting for the response and every gap in the stream.
	idle := time.AfterFunc(c.idleTimeout, func() { cancel(errIdleTimeout) })
	defer idle.Stop()

	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return roundResult{}, &providerError{code: "provider_not_found", detail: err,
			message: fmt.Sprintf("the provider address (base_url, host %s) cannot be used; fix base_url in the agent's config", c.host)}
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "text/event-stream")
	if key := c.apiKey(); key != "" {
		httpReq.Header.Set("Authorization", "Bearer "+key)
	}
	// An LLM proxy can continue the turn's trace.
	tracecontext.InjectHTTP(ctx, httpReq.Header)
	resp, err := c.http.Do(httpReq)
	if err != nil {
		return roundResult{}, c.transportError(ctx, parent, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return roundResult{}, c.statusError(resp)
	}

	var res roundResult
	byIndex := map[int]int{} // tool call index -> position in res.toolCalls
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var data []byte
	for {
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if res.finishReason != "" {
					return res, nil // some servers end without [DONE]
				}
				return res, &providerError{code: "provider_unavailable", retryable: true,
					message: fmt.Sprintf("the provider at %s closed the stream before the reply was complete; send the message again", c.host)}
			}
			return res, c.readError(ctx, parent, err)
		}
		idle.Reset(c.idleTimeout)
		switch {
		case len(line) == 0: // end of one event
			if len(data) == 0 {
				continue
			}
			payload := data
			data = nil
			if string(bytes.TrimSpace(payload)) == "[DONE]" {
				return res, nil
			}
			if err := c.handleChunk(payload, &res, byIndex, h, delivered); err != nil {
				return res, err
			}
		case line[0] == ':': // comment / keep-alive
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
}

const maxSSELine = 8 << 20

// readLine returns one line without its terminator (\n or \r\n).
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) > maxSSELine {
				return nil, &providerError{code: "provider_unavailable", message: "the provider sent an event larger than 8 MiB"}
			}
			continue
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return bytes.TrimRight(line, "\r\n"), nil
			}
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

func (c *providerClient) handleChunk(payload []byte, res *roundResult, byIndex map[int]int, h streamHandler, delivered *bool) error {
	var chunk streamChunk
	if err := json.Unmarshal(payload, &chunk); err != nil {
		return &providerError{code: "provider_unavailable", detail: err,
			message: fmt.Sprintf("the provider at %s sent a stream event that is not valid JSON; check that base_url points at an OpenAI-compatible API", c.host)}
	}
	if chunk.Error != nil {
		return &providerError{code: "agent_error", retryable: !*delivered,
			message: fmt.Sprintf("the provider at %s reported an error mid-stream: %s", c.host, providerWords(chunk.Error.Message))}
	}
	if chunk.Usage != nil {
		u := chunk.Usage.usage()
		res.usage = &u
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue // agenticd asks for one choice
		}
		d := ch.Delta
		if r := d.ReasoningContent + d.Reasoning; r != "" {
			*delivered = true
			h.reasoning(r)
		}
		if d.Content != "" {
			*delivered = true
			h.text(d.Content)
		}
		for _, tc := range d.ToolCalls {
			*delivered = true
			n := len(res.toolCalls)
			pos := n
			switch {
			case tc.Index != nil:
				if p, ok := byIndex[*tc.Index]; ok {
					pos = p
				} else {
					byIndex[*tc.Index] = n
				}
			case n > 0 && (tc.ID == "" || tc.ID == res.toolCalls[n-1].ID):
				pos = n - 1 // a server that sends no index continues the last call
			}
			if pos == n {
				res.toolCalls = append(res.toolCalls, toolCall{Type: "function"})
			}
			call := &res.toolCalls[pos]
			if tc.ID != "" {
				call.ID = tc.ID
			}
			call.Function.Name += tc.Function.Name
			call.Function.Arguments += tc.Function.Arguments
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			res.finishReason = *ch.FinishReason
		}
	}
	return nil
}

// transportError words a failed request or read; ctx is the call's own context, parent
// the turn's.
func (c *providerClient) transportError(ctx, parent context.Context, err error) error {
	if parent.Err() != nil {
		return context.Cause(parent)
	}
	if errors.Is(context.Cause(ctx), errIdleTimeout) {
		return &providerError{code: "provider_unavailable", retryable: true, detail: err,
			message: fmt.Sprintf("the provider at %s sent nothing for %s; it may be overloaded or the model still loading; try again", c.host, c.idleTimeout)}
	}
	return &providerError{code: "provider_unavailable", retryable: true, detail: err,
		message: fmt.Sprintf("could not reach the provider at %s; check that it is running and that base_url is right", c.host)}
}

// readError words a failure while reading the stream.
func (c *providerClient) readError(ctx, parent context.Context, err error) error {
	if parent.Err() != nil || errors.Is(context.Cause(ctx), errIdleTimeout) {
		return c.transportError(ctx, parent, err)
	}
	var pe *providerError
	if errors.As(err, &pe) {
		return pe
	}
	return &providerError{code: "provider_unavailable", retryable: true, detail: err,
		message: fmt.Sprintf("the connection to the provider at %s broke mid-reply; send the message again", c.host)}
}

// providerWords makes the provider's own error text safe to quote: valid UTF-8 (the
// body is whatever bytes the provider sent) and at most maxProviderDetail bytes.
func providerWords(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if cut := textutil.Prefix(s, maxProviderDetail); len(cut) < len(s) {
		return cut + "..."
	}
	return s
}

// statusError words an answer other than 200 OK, quoting the provider's own message
// (a JSON error's message, or the start of the body).
func (c *providerClient) statusError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	detail := string(raw)
	var wrapped struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(raw, &wrapped) == nil && wrapped.Error != nil && wrapped.Error.Message != "" {
		detail = wrapped.Error.Message
	}
	detail = providerWords(detail)
	if detail != "" {
		detail = ": " + detail
	}
	pe := &providerError{}
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		pe.code = "provider_unauthorized"
		pe.message = fmt.Sprintf("the provider at %s rejected the API key (HTTP %d)%s; check the key in the environment variable named by api_key_env", c.host, code, detail)
		if c.apiKey() == "" {
			pe.message = fmt.Sprintf("the provider at %s wants an API key (HTTP %d)%s and agenticd sent none: put the key in an environment variable of agenticd "+
				"and name it with api_key_env in the agent's entry (deepchat.default set up from the environment reads OPENAI_API_KEY), then restart agenticd", c.host, code, detail)
		}
	case code == http.StatusTooManyRequests:
		pe.code, pe.retryable = "provider_rate_limited", true
		pe.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
		pe.message = fmt.Sprintf("the provider at %s is rate limiting requests (HTTP 429)%s", c.host, detail)
		if pe.retryAfter > 0 {
			pe.message += fmt.Sprintf("; retry after %s", pe.retryAfter)
		} else {
			pe.message += "; wait a moment and send the message again"
		}
	case code == http.StatusNotFound:
		pe.code = "provider_not_found"
		pe.message = fmt.Sprintf("the provider at %s answered 404 Not Found%s; check base_url (it should end in /v1 for most providers) and the model id", c.host, detail)
	case code >= 500 || code == http.StatusRequestTimeout:
		pe.code, pe.retryable = "provider_unavailable", true
		pe.message = fmt.Sprintf("the provider at %s failed with HTTP %d%s; try again later", c.host, code, detail)
	default:
		pe.code = "provider_bad_request"
		pe.message = fmt.Sprintf("the provider at %s refused the request (HTTP %d)%s", c.host, code, detail)
	}
	return pe
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or unreadable.
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}
