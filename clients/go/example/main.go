// Command example is a small agenticd client: it creates a session, subscribes to
// its events, sends one message, prints the assistant's reply as it streams and
// allows once whatever tool the agent asks permission for.
//
//	go run ./clients/go/example --workspace ~/src/project --agent deepchat.default \
//	    --message 'Say hello' [--addr 127.0.0.1:50051] [--token T]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

func main() {
	if err := run(); err != nil {
		if r := reason(err); r != "" {
			fmt.Fprintf(os.Stderr, "example: %s: %v\n", r, err)
		} else {
			fmt.Fprintln(os.Stderr, "example:", err)
		}
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", envOr("AGENTICD_ADDR", "127.0.0.1:50051"), "agenticd's address (env AGENTICD_ADDR)")
	token := flag.String("token", strings.TrimSpace(os.Getenv("AGENTICD_TOKEN")), "bearer token (env AGENTICD_TOKEN)")
	agent := flag.String("agent", "deepchat.default", "agent id, as ListAgents shows it")
	workspace := flag.String("workspace", "", "absolute directory under one of the server's workspace_roots")
	message := flag.String("message", "Hello! What can you do?", "the message to send")
	flag.Parse()
	if *workspace == "" {
		return errors.New("--workspace is required: an absolute directory under one of the server's workspace_roots")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // also ends the Subscribe stream
	if *token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*token)
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := agenticv1.NewAgenticServiceClient(conn)

	created, err := client.CreateSession(ctx, &agenticv1.CreateSessionRequest{
		AgentId: *agent,
		Config:  &agenticv1.SessionConfig{Workspace: *workspace},
		// A request_id makes a retry safe: a repeat gets the first call's answer.
		RequestId: uuid.NewString(),
	})
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	session := created.GetSession()
	defer client.CloseSession(ctx, &agenticv1.CloseSessionRequest{SessionId: session.GetSessionId()})

	// Subscribe from the session's last_sequence: the server replays what came after
	// it, so the stream holds every event of the turn however the calls race.
	events, err := client.Subscribe(ctx, &agenticv1.SubscribeRequest{
		SessionIds: []string{session.GetSessionId()},
		Start:      &agenticv1.SubscribeRequest_AfterSequence{AfterSequence: session.GetLastSequence()},
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	// The reply's id, chosen here: every event of the turn can be matched from the first.
	messageID := uuid.NewString()
	_, err = client.SendMessage(ctx, &agenticv1.SendMessageRequest{
		SessionId: session.GetSessionId(),
		Content: &agenticv1.MessageContent{Parts: []*agenticv1.ContentPart{
			{Part: &agenticv1.ContentPart_Text{Text: *message}},
		}},
		RequestId: uuid.NewString(),
		MessageId: messageID,
	})
	if err != nil {
		return fmt.Errorf("send message: %w", err)
	}

	for {
		frame, err := events.Recv()
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		// Events come in batches; bookmarks, the caught-up marker and heartbeats carry
		// none and matter only to a client that resumes streams.
		for _, event := range frame.GetEvents().GetEvents() {
			done, err := handleEvent(ctx, client, session.GetSessionId(), messageID, event)
			if done || err != nil {
				return err
			}
		}
	}
}

// handleEvent prints the reply's text and answers permission requests; it reports
// whether the reply ended.
func handleEvent(ctx context.Context, client agenticv1.AgenticServiceClient, sessionID, messageID string, event *agenticv1.AgenticEvent) (bool, error) {
	switch p := event.GetPayload().(type) {
	case *agenticv1.AgenticEvent_MessageDelta:
		// The user's message streams too, under its own id: print only the reply.
		if p.MessageDelta.GetMessageId() == messageID {
			fmt.Print(p.MessageDelta.GetText())
		}
	case *agenticv1.AgenticEvent_ToolPermissionRequired:
		return false, allowOnce(ctx, client, sessionID, p.ToolPermissionRequired.GetRequest())
	case *agenticv1.AgenticEvent_Error:
		fmt.Fprintf(os.Stderr, "agent error %s: %s\n", p.Error.GetReason(), p.Error.GetMessage())
	case *agenticv1.AgenticEvent_MessageEnd:
		if p.MessageEnd.GetMessageId() != messageID {
			return false, nil
		}
		fmt.Println()
		if reason := p.MessageEnd.GetStopReason(); reason != agenticv1.StopReason_STOP_REASON_END_TURN {
			return true, fmt.Errorf("the turn ended with %s", reason)
		}
		return true, nil
	}
	return false, nil
}

// allowOnce answers a permission request with its allow-once option.
func allowOnce(ctx context.Context, client agenticv1.AgenticServiceClient, sessionID string, req *agenticv1.PermissionRequest) error {
	for _, option := range req.GetOptions() {
		if option.GetKind() != agenticv1.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE {
			continue
		}
		fmt.Fprintf(os.Stderr, "permission %q: chose %q\n", req.GetDescription(), option.GetName())
		_, err := client.RespondPermission(ctx, &agenticv1.RespondPermissionRequest{
			SessionId:    sessionID,
			PermissionId: req.GetPermissionId(),
			Answer:       &agenticv1.RespondPermissionRequest_OptionId{OptionId: option.GetOptionId()},
			RequestId:    uuid.NewString(),
		})
		return err
	}
	fmt.Fprintf(os.Stderr, "permission %q: no allow-once option; left unanswered\n", req.GetDescription())
	return nil
}

// reason is the ErrorInfo reason agenticd puts on every failed call (e.g.
// "SESSION_BUSY"): what a program acts on, where the message is for people.
func reason(err error) string {
	for _, detail := range status.Convert(err).Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok && info.GetDomain() == "agenticd" {
			return info.GetReason()
		}
	}
	return ""
}

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}
