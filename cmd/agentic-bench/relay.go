package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

// The relay is the floor under agenticd's latency: the bare acp-go-sdk client plus the
// least a Go gRPC service must do to fan chunks out, with none of agenticd's own work (no
// normalising, held events, projection or transcript). It serves the generated
// AgenticService with five calls; each event is marshalled once, in the SDK's handler,
// and each subscriber gets a channel and a goroutine that sends the same bytes. agenticd's
// latency minus the relay's is what agenticd itself adds; the relay's minus the bare
// client's is what a gRPC fan-out to that many connections costs on the machine.

const relaySessionID = "relay-session"

// relayCmd serves the relay until SIGTERM or SIGINT (run by startRelay as a process, so
// that it pays for its own CPU as agenticd does).
func relayCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("relay", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	agent := fs.String("agent", "bin/testagent", "the scripted ACP test agent binary")
	var env envFlag
	fs.Var(&env, "env", "KEY=VALUE for the agent's environment (repeatable)")
	fs.Parse(args)
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	r := &relayServer{agent: agentSpec{bin: *agent, env: env}}
	defer r.close()
	srv := newRelayGRPCServer(r)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		srv.Stop()
		<-served
		return nil
	}
}

// newRelayGRPCServer serves r and the health service (SERVING), with the relay's codec.
func newRelayGRPCServer(r *relayServer) *grpc.Server {
	srv := grpc.NewServer(grpc.ForceServerCodecV2(relayCodec{encoding.GetCodecV2(protocodec.Name)}))
	pb.RegisterAgenticServiceServer(srv, r)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	return srv
}

// envFlag collects repeated -env KEY=VALUE flags.
type envFlag map[string]string

func (e *envFlag) String() string { return fmt.Sprint(map[string]string(*e)) }

func (e *envFlag) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("-env %q: want KEY=VALUE", kv)
	}
	if *e == nil {
		*e = envFlag{}
	}
	(*e)[k] = v
	return nil
}

// relayServer holds one session of the test agent and its subscribers.
type relayServer struct {
	pb.UnimplementedAgenticServiceServer
	agent agentSpec

	mu      sync.Mutex
	seq     uint64
	subs    map[chan relayWire]struct{}
	proc    *agentProc
	conn    *sdk.ClientSideConnection
	acpID   sdk.SessionId
	prompts sync.WaitGroup // the turn in flight, ended by stopping the agent
}

var _ pb.AgenticServiceServer = (*relayServer)(nil)

// relayQueue is a subscriber's channel capacity, agenticd's default subscriber_queue.
const relayQueue = 4096

func (r *relayServer) CreateSession(ctx context.Context, req *pb.CreateSessionRequest) (*pb.CreateSessionResponse, error) {
	r.mu.Lock()
	busy := r.proc != nil
	r.mu.Unlock()
	if busy {
		return nil, status.Error(codes.FailedPrecondition, "the relay holds one session at a time; close it first")
	}
	proc, err := startAgent(r.agent)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	conn := sdk.NewClientSideConnection(&relayClient{r: r}, proc.stdin, proc.stdout)
	conn.SetLogger(discardLogger)
	if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		proc.stop()
		return nil, status.Errorf(codes.Unavailable, "initialize: %v", err)
	}
	sess, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: req.GetConfig().GetWorkspace(), McpServers: []sdk.McpServer{}})
	if err != nil {
		proc.stop()
		return nil, status.Errorf(codes.Unavailable, "session/new: %v", err)
	}
	r.mu.Lock()
	if r.proc != nil { // another CreateSession got there first
		r.mu.Unlock()
		proc.stop()
		return nil, status.Error(codes.FailedPrecondition, "the relay holds one session at a time; close it first")
	}
	r.proc, r.conn, r.acpID = proc, conn, sess.SessionId
	r.mu.Unlock()
	return &pb.CreateSessionResponse{Session: &pb.SessionInfo{SessionId: relaySessionID, AgentId: req.GetAgentId()}}, nil
}

func (r *relayServer) GetSession(_ context.Context, req *pb.GetSessionRequest) (*pb.GetSessionResponse, error) {
	if req.GetSessionId() != relaySessionID {
		return nil, status.Errorf(codes.NotFound, "session %q: the relay has only %q", req.GetSessionId(), relaySessionID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &pb.GetSessionResponse{Session: &pb.SessionInfo{SessionId: relaySessionID, LastSequence: r.seq}}, nil
}

// Subscribe streams live events only: the relay holds none to replay.
func (r *relayServer) Subscribe(req *pb.SubscribeRequest, stream pb.AgenticService_SubscribeServer) error {
	r.mu.Lock()
	if after := req.GetAfterSequence(); after != r.seq {
		r.mu.Unlock()
		return status.Errorf(codes.Unimplemented, "the relay does not replay: subscribe with after_sequence=%d (the newest)", r.seq)
	}
	ch := make(chan relayWire, relayQueue)
	if r.subs == nil {
		r.subs = map[chan relayWire]struct{}{}
	}
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	defer r.unsubscribe(ch)
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-ch:
			if !ok {
				return status.Error(codes.ResourceExhausted, "subscriber fell a whole queue behind")
			}
			if err := stream.SendMsg(ev); err != nil {
				return err
			}
		}
	}
}

func (r *relayServer) unsubscribe(ch chan relayWire) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.subs, ch) // a no-op when publish already dropped it
}

// publish numbers ev, marshals it and queues the bytes for every subscriber; one whose
// queue is full is dropped (its stream ends with RESOURCE_EXHAUSTED), as agenticd does.
func (r *relayServer) publish(ev *pb.AgenticEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	ev.Sequence = r.seq
	b, err := proto.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("relay: marshal event %d: %v", r.seq, err)) // generated messages always marshal
	}
	wire := relayWire{mem.SliceBuffer(b)}
	for ch := range r.subs {
		select {
		case ch <- wire:
		default:
			close(ch)
			delete(r.subs, ch)
		}
	}
}

func (r *relayServer) event(t pb.AgenticEventType) *pb.AgenticEvent {
	return &pb.AgenticEvent{SessionId: relaySessionID, AgentId: benchACPAgent, Time: timestamppb.Now(), Type: t}
}

// SendMessage starts the prompt turn; MESSAGE_END follows its last chunk.
func (r *relayServer) SendMessage(_ context.Context, req *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	r.mu.Lock()
	conn, id := r.conn, r.acpID
	if conn != nil {
		r.prompts.Add(1)
	}
	r.mu.Unlock()
	if conn == nil || req.GetSessionId() != relaySessionID {
		return nil, status.Errorf(codes.NotFound, "session %q: create the relay's session first", req.GetSessionId())
	}
	go func() {
		defer r.prompts.Done()
		// The turn ends with the agent: CloseSession and close stop it.
		resp, err := conn.Prompt(context.Background(), sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock(req.GetContent().GetText())}})
		stop := pb.StopReason_STOP_REASON_END_TURN
		if err != nil || resp.StopReason != sdk.StopReasonEndTurn {
			stop = pb.StopReason_STOP_REASON_UNSPECIFIED
		}
		ev := r.event(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_END)
		ev.Payload = &pb.AgenticEvent_MessageEnd{MessageEnd: &pb.MessageEnd{MessageId: "relay-reply", StopReason: stop, Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}
		r.publish(ev)
	}()
	return &pb.SendMessageResponse{MessageId: "relay-reply"}, nil
}

func (r *relayServer) CloseSession(_ context.Context, req *pb.CloseSessionRequest) (*pb.CloseSessionResponse, error) {
	if req.GetSessionId() != relaySessionID {
		return nil, status.Errorf(codes.NotFound, "session %q: the relay has only %q", req.GetSessionId(), relaySessionID)
	}
	r.close()
	return &pb.CloseSessionResponse{}, nil
}

// close stops the agent and waits for the turn in flight to end.
func (r *relayServer) close() {
	r.mu.Lock()
	proc := r.proc
	r.proc, r.conn = nil, nil
	r.mu.Unlock()
	if proc != nil {
		proc.stop()
	}
	r.prompts.Wait()
}

// relayClient turns the agent's text chunks into MESSAGE_DELTA events.
type relayClient struct {
	sdkClient
	r *relayServer
}

func (c *relayClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	if chunk := n.Update.AgentMessageChunk; chunk != nil && chunk.Content.Text != nil {
		ev := c.r.event(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA)
		ev.Payload = &pb.AgenticEvent_MessageDelta{MessageDelta: &pb.MessageDelta{MessageId: "relay-reply", Text: chunk.Content.Text.Text, Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}
		c.r.publish(ev)
	}
	return nil
}

// relayWire is an event's wire bytes, shared by every subscriber's stream.
type relayWire mem.BufferSlice

// relayCodec is gRPC's proto codec, except that it sends a relayWire as it is.
type relayCodec struct{ encoding.CodecV2 }

func (c relayCodec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(relayWire); ok {
		return mem.BufferSlice(w), nil
	}
	return c.CodecV2.Marshal(v)
}

// startRelay runs this program's relay subcommand as a process, reading spec's agent.
func startRelay(ctx context.Context, spec agentSpec, logDir string) (*agenticd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"relay", "-listen", addr, "-agent", spec.bin}
	for k, v := range spec.env {
		args = append(args, "-env", k+"="+v)
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	return startProcess(ctx, "the relay", exec.Command(self, args...), addr, filepath.Join(logDir, "relay.log"))
}
