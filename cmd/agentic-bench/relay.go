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

// The relay is the floor under agenticd: an ACP client plus the least a Go gRPC service
// does to fan chunks out, with none of agenticd's own work (no normalising, held events,
// projection or transcript). It serves the generated AgenticService with five calls;
// each event is marshalled once, and each subscriber gets a channel and a goroutine that
// sends the same bytes. It reads the agent one of two ways:
//
//   - sdk (the latency rows): the bare acp-go-sdk client, dropping a subscriber that
//     falls a whole queue behind, as agenticd does. agenticd's latency minus the relay's
//     is what agenticd itself adds; the relay's minus the bare client's is what a gRPC
//     fan-out to that many connections costs on the machine.
//   - raw (the 16-subscriber floods): the raw reader, waiting for the slowest subscriber
//     before it reads the next line, so that the pipe holds the agent back and nothing
//     is dropped or resumed: the most a fan-out can deliver with the agent, the server
//     and the clients sharing the machine.

const (
	relaySessionID = "relay-session"
	relayReplyID   = "relay-reply"
	// relayQueue is a subscriber's channel capacity, agenticd's default subscriber_queue.
	relayQueue = 4096
)

// relayCmd serves the relay until SIGTERM or SIGINT (run by startRelay as a process, so
// that it pays for its own CPU as agenticd does).
func relayCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("relay", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	agent := fs.String("agent", "bin/testagent", "the scripted ACP test agent binary")
	reader := fs.String("reader", "sdk", "how to read the agent: sdk (drop a subscriber a whole queue behind) or raw (wait for the slowest subscriber)")
	var env envFlag
	fs.Var(&env, "env", "KEY=VALUE for the agent's environment (repeatable)")
	fs.Parse(args)
	if *reader != "sdk" && *reader != "raw" {
		return fmt.Errorf("-reader %q: want sdk or raw", *reader)
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	r := &relayServer{agent: agentSpec{bin: *agent, env: env}, raw: *reader == "raw"}
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
	raw   bool // read the agent with a rawConn and wait for the slowest subscriber

	mu      sync.Mutex
	seq     uint64
	subs    map[*relaySub]struct{}
	proc    *agentProc
	prompt  func(text string) pb.StopReason // runs one turn on the agent
	prompts sync.WaitGroup                  // the turn in flight, ended by stopping the agent
}

var _ pb.AgenticServiceServer = (*relayServer)(nil)

// relaySub is one Subscribe stream. gone is closed when the stream ends, so that a
// publisher waiting for it moves on.
type relaySub struct {
	ch   chan relayWire
	gone chan struct{}
}

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
	prompt, err := r.open(ctx, proc, req.GetConfig().GetWorkspace())
	if err != nil {
		proc.stop()
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	r.mu.Lock()
	if r.proc != nil { // another CreateSession got there first
		r.mu.Unlock()
		proc.stop()
		return nil, status.Error(codes.FailedPrecondition, "the relay holds one session at a time; close it first")
	}
	r.proc, r.prompt = proc, prompt
	r.mu.Unlock()
	return &pb.CreateSessionResponse{Session: &pb.SessionInfo{SessionId: relaySessionID, AgentId: req.GetAgentId()}}, nil
}

// open starts an ACP session on the agent and returns how to run a turn on it.
func (r *relayServer) open(ctx context.Context, proc *agentProc, workspace string) (func(string) pb.StopReason, error) {
	if r.raw {
		conn := newRawConn(proc)
		id, err := conn.open(workspace)
		if err != nil {
			return nil, err
		}
		return func(text string) pb.StopReason {
			err := conn.prompt(id, text, func(m *rawMessage, _ int64) {
				if m.Params.Update.SessionUpdate == "agent_message_chunk" {
					r.publish(r.delta(m.Params.Update.Content.Text))
				}
			})
			return stopReason(err == nil)
		}, nil
	}
	conn := sdk.NewClientSideConnection(&relayClient{r: r}, proc.stdin, proc.stdout)
	conn.SetLogger(discardLogger)
	if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	sess, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: workspace, McpServers: []sdk.McpServer{}})
	if err != nil {
		return nil, fmt.Errorf("session/new: %w", err)
	}
	return func(text string) pb.StopReason {
		// The turn ends with the agent: CloseSession and close stop it.
		resp, err := conn.Prompt(context.Background(), sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
		return stopReason(err == nil && resp.StopReason == sdk.StopReasonEndTurn)
	}, nil
}

func stopReason(endTurn bool) pb.StopReason {
	if endTurn {
		return pb.StopReason_STOP_REASON_END_TURN
	}
	return pb.StopReason_STOP_REASON_UNSPECIFIED
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
	sub := &relaySub{ch: make(chan relayWire, relayQueue), gone: make(chan struct{})}
	if r.subs == nil {
		r.subs = map[*relaySub]struct{}{}
	}
	r.subs[sub] = struct{}{}
	r.mu.Unlock()
	defer r.unsubscribe(sub)
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wire, ok := <-sub.ch:
			if !ok {
				return status.Error(codes.ResourceExhausted, "subscriber fell a whole queue behind")
			}
			if err := stream.SendMsg(wire); err != nil {
				return err
			}
		}
	}
}

func (r *relayServer) unsubscribe(sub *relaySub) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.subs, sub) // a no-op when publish already dropped it
	close(sub.gone)
}

// publish numbers ev, marshals it and queues the bytes for every subscriber. The sdk
// reader drops a subscriber whose queue is full (its stream ends with
// RESOURCE_EXHAUSTED), as agenticd does; the raw reader waits for it.
func (r *relayServer) publish(ev *pb.AgenticEvent) {
	r.mu.Lock()
	r.seq++
	ev.Sequence = r.seq
	b, err := proto.Marshal(ev)
	if err != nil {
		r.mu.Unlock()
		panic(fmt.Sprintf("relay: marshal event %d: %v", ev.Sequence, err)) // generated messages always marshal
	}
	wire := relayWire{mem.SliceBuffer(b)}
	if !r.raw {
		defer r.mu.Unlock()
		for sub := range r.subs {
			select {
			case sub.ch <- wire:
			default:
				close(sub.ch)
				delete(r.subs, sub)
			}
		}
		return
	}
	subs := make([]*relaySub, 0, len(r.subs))
	for sub := range r.subs {
		subs = append(subs, sub)
	}
	r.mu.Unlock()
	for _, sub := range subs {
		select {
		case sub.ch <- wire:
		case <-sub.gone:
		}
	}
}

func (r *relayServer) event(t pb.AgenticEventType) *pb.AgenticEvent {
	return &pb.AgenticEvent{SessionId: relaySessionID, AgentId: benchACPAgent, Time: timestamppb.Now(), Type: t}
}

func (r *relayServer) delta(text string) *pb.AgenticEvent {
	ev := r.event(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA)
	ev.Payload = &pb.AgenticEvent_MessageDelta{MessageDelta: &pb.MessageDelta{MessageId: relayReplyID, Text: text, Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}
	return ev
}

// SendMessage starts the prompt turn; MESSAGE_END follows its last chunk.
func (r *relayServer) SendMessage(_ context.Context, req *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	r.mu.Lock()
	prompt := r.prompt
	if prompt != nil {
		r.prompts.Add(1)
	}
	r.mu.Unlock()
	if prompt == nil || req.GetSessionId() != relaySessionID {
		return nil, status.Errorf(codes.NotFound, "session %q: create the relay's session first", req.GetSessionId())
	}
	go func() {
		defer r.prompts.Done()
		stop := prompt(req.GetContent().GetText())
		ev := r.event(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_END)
		ev.Payload = &pb.AgenticEvent_MessageEnd{MessageEnd: &pb.MessageEnd{MessageId: relayReplyID, StopReason: stop, Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}
		r.publish(ev)
	}()
	return &pb.SendMessageResponse{MessageId: relayReplyID}, nil
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
	r.proc, r.prompt = nil, nil
	r.mu.Unlock()
	if proc != nil {
		proc.stop()
	}
	r.prompts.Wait()
}

// relayClient turns the agent's text chunks into MESSAGE_DELTA events (sdk reader).
type relayClient struct {
	sdkClient
	r *relayServer
}

func (c *relayClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	if chunk := n.Update.AgentMessageChunk; chunk != nil && chunk.Content.Text != nil {
		c.r.publish(c.r.delta(chunk.Content.Text.Text))
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

// startRelay runs this program's relay subcommand as a process on spec's agent, reading
// it with reader (sdk or raw).
func startRelay(ctx context.Context, spec agentSpec, reader, logDir string) (*agenticd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"relay", "-listen", addr, "-agent", spec.bin, "-reader", reader}
	for k, v := range spec.env {
		args = append(args, "-env", k+"="+v)
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	return startProcess(ctx, "the relay", exec.Command(self, args...), addr, filepath.Join(logDir, "relay.log"))
}
