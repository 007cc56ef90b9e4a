package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// cmdElicit answers a pending elicitation: accept (with a form's values as a JSON
// object), decline or cancel.
func cmdElicit(c *cli, args []string) error {
	fs := flag.NewFlagSet("elicit", flag.ContinueOnError)
	accept := fs.String("accept", "", "accept, with the form's values as a JSON object ('{}' for a URL elicitation)")
	decline := fs.Bool("decline", false, "decline to give the input")
	cancel := fs.Bool("cancel", false, "dismiss the request without choosing")
	pos, err := c.parse(fs, args, "SESSION", "ELICITATION_ID")
	if err != nil {
		return err
	}
	chosen := 0
	for _, set := range []bool{*accept != "", *decline, *cancel} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return usagef("give exactly one of --accept JSON, --decline, --cancel")
	}
	req := &pb.RespondElicitationRequest{SessionId: pos[0], ElicitationId: pos[1], RequestId: uuid.NewString()}
	switch {
	case *decline:
		req.Action = pb.ElicitationAction_ELICITATION_ACTION_DECLINE
	case *cancel:
		req.Action = pb.ElicitationAction_ELICITATION_ACTION_CANCEL
	default:
		req.Action = pb.ElicitationAction_ELICITATION_ACTION_ACCEPT
		var values map[string]any
		if err := json.Unmarshal([]byte(*accept), &values); err != nil || values == nil {
			return usagef("--accept takes a JSON object of the form's values, e.g. '{\"name\": \"Ada\"}' (%q is not one)", *accept)
		}
		if len(values) > 0 {
			if req.Content, err = structpb.NewStruct(values); err != nil {
				return usagef("--accept: %v", err)
			}
		}
	}
	ctx, done := c.call()
	defer done()
	resp, err := c.client.RespondElicitation(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, describeResolution(resp.GetResolution()))
	return nil
}

// describeElicitation is an elicitation request on one line: its mode, message, and the
// form's fields or the URL.
func describeElicitation(r *pb.ElicitationRequest) string {
	s := fmt.Sprintf("%s %s %q", r.GetElicitationId(), enumName(r.GetMode().String(), "ELICITATION_MODE_"), r.GetMessage())
	if r.GetUrl() != "" {
		s += " url=" + r.GetUrl()
	}
	if schema := r.GetRequestedSchema(); schema != nil {
		b, err := protojson.Marshal(schema)
		if err == nil {
			s += " schema=" + string(b)
		}
	}
	if r.GetToolId() != "" {
		s += " tool=" + r.GetToolId()
	}
	return s
}

// describeResolution is how an elicitation was resolved, on one line.
func describeResolution(r *pb.ElicitationResolved) string {
	s := fmt.Sprintf("%s %s by=%s", r.GetElicitationId(), enumName(r.GetAction().String(), "ELICITATION_ACTION_"), enumName(r.GetDecidedBy().String(), "ELICITATION_DECIDER_"))
	if c := r.GetContent(); c != nil {
		if b, err := protojson.Marshal(c); err == nil {
			s += " content=" + string(b)
		}
	}
	return strings.TrimSpace(s + " " + r.GetReason())
}
