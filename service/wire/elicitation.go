package wire

import (
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/presenters"
)

var (
	elicitationModes = map[presenters.ElicitationMode]pb.ElicitationMode{
		presenters.ElicitationForm: pb.ElicitationMode_ELICITATION_MODE_FORM,
		presenters.ElicitationURL:  pb.ElicitationMode_ELICITATION_MODE_URL,
	}
	elicitationActions = map[presenters.ElicitationAction]pb.ElicitationAction{
		presenters.ElicitationAccept:  pb.ElicitationAction_ELICITATION_ACTION_ACCEPT,
		presenters.ElicitationDecline: pb.ElicitationAction_ELICITATION_ACTION_DECLINE,
		presenters.ElicitationCancel:  pb.ElicitationAction_ELICITATION_ACTION_CANCEL,
	}
	elicitationDeciders = map[presenters.ElicitationDecider]pb.ElicitationDecider{
		presenters.ElicitationByUser:      pb.ElicitationDecider_ELICITATION_DECIDER_USER,
		presenters.ElicitationByAgent:     pb.ElicitationDecider_ELICITATION_DECIDER_AGENT,
		presenters.ElicitationByCancelled: pb.ElicitationDecider_ELICITATION_DECIDER_CANCELLED,
	}
)

func elicitationRequestToPB(r presenters.ElicitationRequest) *pb.ElicitationRequest {
	return &pb.ElicitationRequest{
		ElicitationId:   clean(r.ElicitationID),
		ToolId:          clean(r.ToolID),
		MessageId:       clean(r.MessageID),
		Message:         clean(r.Message),
		Mode:            elicitationModes[r.Mode],
		RequestedSchema: structOf(r.RequestedSchema),
		Url:             clean(r.URL),
		RequestTime:     timestamp(r.RequestedAt),
	}
}

// ElicitationResolvedToPB is how an elicitation was resolved, on the wire.
func ElicitationResolvedToPB(r presenters.ElicitationResolvedPayload) *pb.ElicitationResolved {
	return &pb.ElicitationResolved{
		ElicitationId: clean(r.ElicitationID),
		ToolId:        clean(r.ToolID),
		Action:        elicitationActions[r.Action],
		Content:       structOf(r.Content),
		DecidedBy:     elicitationDeciders[r.DecidedBy],
		Reason:        clean(r.Reason),
		Principal:     clean(r.Principal),
	}
}

// structOf is decoded JSON as a Struct; nil for none (or for a value JSON never
// decodes to, which Struct cannot carry).
func structOf(m map[string]any) *structpb.Struct {
	if m == nil {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}

// ElicitationActionFromPB is the domain action of a wire action (false for UNSPECIFIED).
func ElicitationActionFromPB(a pb.ElicitationAction) (presenters.ElicitationAction, bool) {
	for k, v := range elicitationActions {
		if v == a {
			return k, true
		}
	}
	return "", false
}

// ElicitationActionToPB is the wire form of an elicitation's action (UNSPECIFIED if unknown).
func ElicitationActionToPB(a presenters.ElicitationAction) pb.ElicitationAction {
	return elicitationActions[a]
}

// ElicitationDeciderToPB is the wire form of who resolved an elicitation (UNSPECIFIED if
// unknown).
func ElicitationDeciderToPB(d presenters.ElicitationDecider) pb.ElicitationDecider {
	return elicitationDeciders[d]
}
