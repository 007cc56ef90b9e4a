package main

import (
	"strings"
	"time"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// textContent is a message of one text part.
func textContent(text string) *pb.MessageContent {
	return &pb.MessageContent{Parts: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: text}}}}
}

// contentText is a message's text parts, joined.
func contentText(c *pb.MessageContent) string {
	var b strings.Builder
	for _, p := range c.GetParts() {
		b.WriteString(p.GetText())
	}
	return b.String()
}

// after is the start point after_sequence = seq.
func after(seq uint64) *pb.SubscribeRequest_AfterSequence {
	return &pb.SubscribeRequest_AfterSequence{AfterSequence: seq}
}

// eventReader reads a Subscribe stream event by event, out of its batches; the other
// frames (caught-up marker, bookmarks, heartbeats) are skipped. received is when the
// frame holding the event arrived.
type eventReader struct {
	stream   pb.AgenticService_SubscribeClient
	pending  []*pb.AgenticEvent
	received time.Time
}

func (r *eventReader) next() (*pb.AgenticEvent, error) {
	for len(r.pending) == 0 {
		frame, err := r.stream.Recv()
		r.received = time.Now()
		if err != nil {
			return nil, err
		}
		r.pending = frame.GetEvents().GetEvents()
	}
	ev := r.pending[0]
	r.pending = r.pending[1:]
	return ev, nil
}
