package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

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

// The relay is a plain Go gRPC fan-out to compare agenticd with: the raw reader (rawConn)
// plus the least a gRPC service does to pass chunks on, and none of agenticd's own work
// (no normalising, held events, replay, projection or transcript). It serves the
// generated AgenticService with five calls; each text chunk becomes a MESSAGE_DELTA,
// marshalled once, and each subscriber gets a channel and a goroutine that sends the
// shared bytes. A subscriber that falls a whole queue behind is either dropped (its
// stream ends with RESOURCE_EXHAUSTED; it cannot resume, there is nothing held), or,
// with -wait, waited for: the reader then reads the agent's next line only once every
// queue took the chunk, so the pipe holds the agent back. The latency rows use the
// first, the 16-subscriber floods the second (there a subscriber does fall behind).

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
	wait := fs.Bool("wait", false, "wait for a subscriber a whole queue behind instead of dropping it")
	var env envFlag
	fs.Var(&env, "env", "KEY=VALUE for the agent's environment (repeatable)")
	fs.Parse(args)
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	r := &relayServer{agent: agentSpec{bin: *agent, env: env}, wait: *wait}
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
	wait  bool // wait for a subscriber a whole queue behind instead of dropping it

	mu      sync.Mutex
	seq     uint64
	subs    []*relaySub // replaced, never changed in place: publish reads it without a copy
	proc    *agentProc
	conn    *rawConn
	acpID   string
	turning bool           // a turn is in flight; the agent takes one prompt at a time
	turns   sync.WaitGroup // the turn in flight, ended by stopping the agent
}

var _ pb.AgenticServiceServer = (*relayServer)(nil)

// relaySub is one Subscribe stream. gone is closed when the stream ends, so that a
// publisher waiting for it moves on.
type relaySub struct {
	ch   chan *relayWire
	gone chan struct{}
}

var errOneSession = status.Error(codes.FailedPrecondition, "the relay holds one session at a time; close it first")

func (r *relayServer) CreateSession(ctx context.Context, req *pb.CreateSessionRequest) (*pb.CreateSessionResponse, error) {
	r.mu.Lock()
	busy := r.proc != nil
	r.mu.Unlock()
	if busy {
		return nil, errOneSession
	}
	proc, err := startAgent(r.agent)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	// The handshake reads the agent's pipe, which only the agent's end unblocks: a
	// cancelled call stops the agent.
	stop := context.AfterFunc(ctx, proc.stop)
	conn := newRawConn(proc)
	id, err := conn.open(req.GetConfig().GetWorkspace())
	stop()
	if err := cmp.Or(ctx.Err(), err); err != nil {
		proc.stop()
		return nil, status.Errorf(codes.Unavailable, "start the agent's session: %v", err)
	}
	r.mu.Lock()
	if r.proc != nil { // another CreateSession got there first
		r.mu.Unlock()
		proc.stop()
		return nil, errOneSession
	}
	r.proc, r.conn, r.acpID = proc, conn, id
	r.mu.Unlock()
	return &pb.CreateSessionResponse{Session: &pb.SessionInfo{SessionId: relaySessionID, AgentId: req.GetAgentId()}}, nil
}

func (r *relayServer) GetSession(_ context.Context, req *pb.GetSessionRequest) (*pb.GetSessionResponse, error) {
	if err := checkRelaySession(req.GetSessionId()); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &pb.GetSessionResponse{Session: &pb.SessionInfo{SessionId: relaySessionID, LastSequence: r.seq}}, nil
}

func checkRelaySession(id string) error {
	if id != relaySessionID {
		return status.Errorf(codes.NotFound, "session %q: the relay has only %q", id, relaySessionID)
	}
	return nil
}

// Subscribe streams live events only: the relay holds none to replay.
func (r *relayServer) Subscribe(req *pb.SubscribeRequest, stream pb.AgenticService_SubscribeServer) error {
	r.mu.Lock()
	if after := req.GetAfterSequence(); after != r.seq {
		r.mu.Unlock()
		return status.Errorf(codes.Unimplemented, "the relay does not replay: subscribe with after_sequence=%d (the newest)", r.seq)
	}
	sub := &relaySub{ch: make(chan *relayWire, relayQueue), gone: make(chan struct{})}
	r.subs = append(slices.Clip(r.subs), sub)
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
				return status.Error(codes.ResourceExhausted, "subscriber fell a whole queue behind; the relay holds no events to resume from")
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
	r.removeLocked(sub) // a no-op when publish already dropped it
	close(sub.gone)
}

// publish numbers ev, marshals it and queues the bytes for every subscriber, dropping or
// (with wait) waiting for one whose queue is full. One goroutine publishes at a time: the
// turn's (see SendMessage).
func (r *relayServer) publish(ev *pb.AgenticEvent) {
	r.mu.Lock()
	r.seq++
	ev.Sequence = r.seq
	subs := r.subs
	r.mu.Unlock()
	// One event per frame: the relay sends each as it comes.
	b, err := proto.Marshal(&pb.SubscribeResponse{Frame: &pb.SubscribeResponse_Events{Events: &pb.EventBatch{Events: []*pb.AgenticEvent{ev}}}})
	if err != nil {
		// Only invalid UTF-8 in a text fails, and encoding/json has replaced it by then.
		panic(fmt.Sprintf("relay: marshal event %d: %v", ev.Sequence, err))
	}
	wire := &relayWire{slice: mem.BufferSlice{mem.SliceBuffer(b)}}
	for _, sub := range subs {
		if r.wait {
			select {
			case sub.ch <- wire:
			case <-sub.gone:
			}
			continue
		}
		select {
		case sub.ch <- wire:
		default:
			r.drop(sub)
		}
	}
}

// drop ends a subscriber whose queue is full: its stream drains the queue, then ends.
func (r *relayServer) drop(sub *relaySub) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removeLocked(sub) {
		close(sub.ch)
	}
}

// removeLocked takes sub out of the subscribers and reports whether it was there.
func (r *relayServer) removeLocked(sub *relaySub) bool {
	kept := slices.DeleteFunc(slices.Clone(r.subs), func(s *relaySub) bool { return s == sub })
	removed := len(kept) < len(r.subs)
	r.subs = kept
	return removed
}

func relayEvent(t pb.AgenticEventType) *pb.AgenticEvent {
	return &pb.AgenticEvent{SessionId: relaySessionID, AgentId: benchACPAgent, EventTime: timestamppb.Now(), Type: t}
}

func relayDelta(text string) *pb.AgenticEvent {
	ev := relayEvent(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_DELTA)
	ev.Payload = &pb.AgenticEvent_MessageDelta{MessageDelta: &pb.MessageDelta{MessageId: relayReplyID, Text: text, Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}
	return ev
}

// SendMessage starts the prompt turn; MESSAGE_END follows its last chunk.
func (r *relayServer) SendMessage(_ context.Context, req *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	if err := checkRelaySession(req.GetSessionId()); err != nil {
		return nil, err
	}
	r.mu.Lock()
	conn, id := r.conn, r.acpID
	switch {
	case conn == nil:
		r.mu.Unlock()
		return nil, status.Error(codes.FailedPrecondition, "the relay has no session open: CreateSession first")
	case r.turning:
		r.mu.Unlock()
		return nil, status.Error(codes.FailedPrecondition, "a turn is in flight: wait for its MESSAGE_END")
	}
	r.turning = true
	r.turns.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.turns.Done()
		// The turn ends with the agent's answer, or with the agent (close stops it).
		err := conn.prompt(id, contentText(req.GetContent()), func(m *rawMessage, _ int64) {
			if m.Params.Update.SessionUpdate == "agent_message_chunk" {
				r.publish(relayDelta(m.Params.Update.Content.Text))
			}
		})
		stop := pb.StopReason_STOP_REASON_END_TURN
		if err != nil {
			stop = pb.StopReason_STOP_REASON_UNSPECIFIED
		}
		ev := relayEvent(pb.AgenticEventType_AGENTIC_EVENT_TYPE_MESSAGE_END)
		ev.Payload = &pb.AgenticEvent_MessageEnd{MessageEnd: &pb.MessageEnd{MessageId: relayReplyID, StopReason: stop, Role: pb.MessageRole_MESSAGE_ROLE_ASSISTANT}}
		r.publish(ev)
		r.mu.Lock()
		r.turning = false
		r.mu.Unlock()
	}()
	return &pb.SendMessageResponse{MessageId: relayReplyID}, nil
}

func (r *relayServer) CloseSession(_ context.Context, req *pb.CloseSessionRequest) (*pb.CloseSessionResponse, error) {
	if err := checkRelaySession(req.GetSessionId()); err != nil {
		return nil, err
	}
	r.close()
	return &pb.CloseSessionResponse{}, nil
}

// close stops the agent and waits for the turn in flight to end. With wait, that turn's
// last publish waits for subscribers that neither read nor leave; the benchmark's read to
// MESSAGE_END before CloseSession, and on SIGTERM the server ends every stream first.
func (r *relayServer) close() {
	r.mu.Lock()
	proc := r.proc
	r.proc, r.conn = nil, nil
	r.mu.Unlock()
	if proc != nil {
		proc.stop()
	}
	r.turns.Wait()
}

// relayWire is an event's frame's wire bytes, shared by every subscriber's stream. It travels as
// a pointer so that a send does not copy it into an interface (an allocation per send).
type relayWire struct{ slice mem.BufferSlice }

// relayCodec is gRPC's proto codec, except that it sends a relayWire as it is.
type relayCodec struct{ encoding.CodecV2 }

func (c relayCodec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(*relayWire); ok {
		return w.slice, nil
	}
	return c.CodecV2.Marshal(v)
}

// startRelay runs this program's relay subcommand as a process on spec's agent; wait
// chooses what it does with a subscriber a whole queue behind (see relayServer).
func startRelay(ctx context.Context, spec agentSpec, wait bool, logDir string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"relay", "-listen", addr, "-agent", spec.bin, fmt.Sprintf("-wait=%t", wait)}
	for k, v := range spec.env {
		args = append(args, "-env", k+"="+v)
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	return startProcess(ctx, "the relay", exec.Command(self, args...), addr, filepath.Join(logDir, "relay.log"))
}
