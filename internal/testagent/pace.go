package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// PacedStep sends Count agent_message_chunk notifications of Size bytes, each stamped
// with the time it was handed to the SDK, so that a client can measure the latency from
// the agent's write to its own receipt (agent and client share the machine's clock).
// Rate > 0 paces them at that many per second; 0 sends them as fast as possible.
//
// Chunk i is "%08d|%019d|" (index, Unix nanoseconds) padded with 'x' to Size bytes: it
// still starts with its index, as flood chunks do.
type PacedStep struct {
	Count int     `json:"count"`
	Size  int     `json:"size"`
	Rate  float64 `json:"rate"`
}

// pacedFromEnv returns the paced step that TESTAGENT_STAMP=1 (with TESTAGENT_PACE_RATE,
// events per second, optional) asks for instead of a plain flood of count chunks of size.
func pacedFromEnv(count, size int) (*PacedStep, error) {
	if os.Getenv("TESTAGENT_STAMP") != "1" {
		return nil, nil
	}
	p := &PacedStep{Count: count, Size: size}
	if v := os.Getenv("TESTAGENT_PACE_RATE"); v != "" {
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil || rate < 0 {
			return nil, fmt.Errorf("TESTAGENT_PACE_RATE %q: want events per second (0 = unpaced)", v)
		}
		p.Rate = rate
	}
	return p, nil
}

// stampedChunk is chunk i stamped with sent (Unix nanoseconds), padded to size bytes.
func stampedChunk(buf []byte, i int, sent int64, size int) string {
	buf = fmt.Appendf(buf[:0], "%08d|%019d|", i, sent)
	for len(buf) < size {
		buf = append(buf, 'x')
	}
	return string(buf)
}

func (t *turn) paced(ctx context.Context, p *PacedStep) error {
	var interval time.Duration
	if p.Rate > 0 {
		interval = time.Duration(float64(time.Second) / p.Rate)
	}
	buf := make([]byte, 0, max(p.Size, 64))
	start := time.Now()
	for i := 0; i < p.Count; i++ {
		if ctx.Err() != nil {
			return nil
		}
		if interval > 0 {
			// A fixed schedule keeps the average rate even when one send runs late.
			if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
				time.Sleep(wait)
			}
		}
		text := stampedChunk(buf, i, time.Now().UnixNano(), p.Size)
		if err := t.send(sdk.UpdateAgentMessageText(text)); err != nil {
			return err
		}
	}
	return nil
}
