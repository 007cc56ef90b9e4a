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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
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
	})
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	session := created.GetSession()
	defer client.CloseSession(ctx, &agenticv1.CloseSessionRequest{SessionId: session.GetSessionId()})

	// Subscribe from the session's last_sequence: the server replays what came after
	// it, so the stream holds every event of the turn however the calls race.
	events, err := client.Subscribe(ctx, &agenticv1.SubscribeRequest{
		SessionIds:    []string{session.GetSessionId()},
		AfterSequence: session.GetLastSequence(),
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	sent, err := client.SendMessage(ctx, &agenticv1.SendMessageRequest{
		SessionId: session.GetSessionId(),
		Content:   &agenticv1.MessageContent{Text: *message},
	})
	if err != nil {
		return fmt.Errorf("send message: %w", err)
	}

	for {
		event, err := events.Recv()
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		switch p := event.GetPayload().(type) {
		case *agenticv1.AgenticEvent_MessageDelta:
			// The user's message streams too, under its own id: print only the reply.
			if p.MessageDelta.GetMessageId() == sent.GetMessageId() {
				fmt.Print(p.MessageDelta.GetText())
			}
		case *agenticv1.AgenticEvent_ToolPermissionRequired:
			if err := allowOnce(ctx, client, session.GetSessionId(), p.ToolPermissionRequired.GetRequest()); err != nil {
				return err
			}
		case *agenticv1.AgenticEvent_Error:
			fmt.Fprintln(os.Stderr, "agent error:", p.Error.GetMessage())
		case *agenticv1.AgenticEvent_MessageEnd:
			if p.MessageEnd.GetMessageId() != sent.GetMessageId() {
				continue
			}
			fmt.Println()
			if reason := p.MessageEnd.GetStopReason(); reason != agenticv1.StopReason_STOP_REASON_END_TURN {
				return fmt.Errorf("the turn ended with %s", reason)
			}
			return nil
		}
	}
}

// allowOnce answers a permission request with its allow-once option.
func allowOnce(ctx context.Context, client agenticv1.AgenticServiceClient, sessionID string, req *agenticv1.PermissionRequest) error {
	for _, option := range req.GetOptions() {
		if option.GetKind() != agenticv1.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE {
			continue
		}
		fmt.Fprintf(os.Stderr, "permission %q: chose %q\n", req.GetDescription(), option.GetName())
		_, err := client.RespondPermission(ctx, &agenticv1.RespondPermissionRequest{
			SessionId: sessionID,
			RequestId: req.GetRequestId(),
			Answer:    &agenticv1.RespondPermissionRequest_OptionId{OptionId: option.GetOptionId()},
		})
		return err
	}
	fmt.Fprintf(os.Stderr, "permission %q: no allow-once option; left unanswered\n", req.GetDescription())
	return nil
}

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}
