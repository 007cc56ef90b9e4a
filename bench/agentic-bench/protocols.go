package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/daemon"
)

// protocolsCmd: one subscriber reads a flood turn over each protocol agenticd's port
// speaks (native gRPC, Connect with JSON, gRPC-Web with binary proto, the last two over
// HTTP/1.1 as a browser without HTTP/2 to the server sends them), a turn each, from the
// same agenticd process in the same run. Each turn is read twice: live, as the agent
// writes it (no faster than the agent, so it shows whether a protocol keeps up), and
// then replayed from the events the server holds, as fast as server, protocol and client
// go (what the protocol itself costs). The control calls (CreateSession, SendMessage) go
// over native gRPC; only the Subscribe stream differs. The order of the three turns
// rotates from run to run so that none always meets the server fresh.
func protocolsCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("protocols", flag.ExitOnError)
	var c common
	c.register(fs, 3)
	count := fs.Int("count", 100_000, "chunks per turn")
	size := fs.Int("size", 64, "bytes per chunk")
	fs.Parse(args)
	cleanup, err := c.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	const section = "Protocols"
	what := fmt.Sprintf("Subscribe to 1 subscriber over native gRPC, Connect JSON and gRPC-Web, %d × %s chunks", *count, sizeLabel(*size))
	if err := c.checkAgent(); err != nil {
		return emit(c.results, notAvailable(section, what, "", err))
	}
	env := floodEnv(*count, *size, 0)
	runs := make([]*protocolRuns, len(subscribeProtocols))
	for i, p := range subscribeProtocols {
		runs[i] = &protocolRuns{name: p.name}
	}
	for run := 0; run < c.runs; run++ {
		turns, err := c.protocolsRun(ctx, env, run, *count, *size)
		if err != nil {
			for _, r := range runs {
				r.add(protocolTurn{live: streamRead{err: err}, replay: streamRead{err: err}}, protocolTurn{}, *count)
			}
			fmt.Printf("run %d: %v\n", run+1, err)
			continue
		}
		var progress []string
		for i, r := range runs {
			r.add(turns[i], turns[0], *count)
			progress = append(progress, r.last(*count))
		}
		fmt.Printf("run %d: %s\n", run+1, strings.Join(progress, "; "))
	}
	return emit(c.results, protocolRows(section, *count, *size, runs)...)
}

// subscribeProtocol opens Subscribe streams to one server in one protocol.
type subscribeProtocol struct {
	name string // as the rows say it
	// connect prepares a client of the server at addr whose connections count the bytes
	// they read into wire; close releases it.
	connect func(addr string, wire *atomic.Int64) (open openStream, close func(), err error)
}

// openStream starts a Subscribe stream; it returns once the server answered (so the
// subscription is registered). Cancelling ctx ends the stream.
type openStream func(ctx context.Context, req *pb.SubscribeRequest) (frameStream, error)

// frameStream yields a Subscribe stream's frames. An error with a gRPC status (from
// whichever protocol) carries the code the stream ended with.
type frameStream interface {
	Recv() (*pb.SubscribeResponse, error)
}

// subscribeProtocols are the protocols measured; the first is the baseline of the ratios.
var subscribeProtocols = []subscribeProtocol{
	{name: "native gRPC", connect: connectNative},
	{name: "Connect JSON over HTTP/1.1", connect: connectHTTP(connectJSON)},
	{name: "gRPC-Web binary over HTTP/1.1", connect: connectHTTP(grpcWebProto)},
}

// protocolsRun starts agenticd, runs one turn per protocol (starting with the protocol
// the run number points at) and stops it. turns are in subscribeProtocols' order.
func (c *common) protocolsRun(ctx context.Context, env map[string]string, run, count, size int) ([]protocolTurn, error) {
	dataDir, workspace, err := c.runDir("protocols")
	if err != nil {
		return nil, err
	}
	cfg := acpConfig(dataDir, workspace, c.agent, env, nil)
	// The replay reads the whole turn from held events, not from the durable log.
	cfg.EventBuffer = max(daemon.DefaultEventBuffer, 2*count)
	s, err := startAgenticd(ctx, c.agenticd, cfg)
	if err != nil {
		return nil, err
	}
	turns := make([]protocolTurn, len(subscribeProtocols))
	for k := range subscribeProtocols {
		i := (run + k) % len(subscribeProtocols)
		turns[i] = runProtocolTurn(ctx, s, subscribeProtocols[i], workspace, size, count)
	}
	if err := s.stop(); err != nil {
		return nil, fmt.Errorf("stop %s: %w", s.name, err)
	}
	return turns, nil
}

// protocolTurn is what the subscriber of one turn read, live and replayed.
type protocolTurn struct{ live, replay streamRead }

// streamRead is one read of a turn to the assistant's MESSAGE_END.
type streamRead struct {
	// elapsed is from SendMessage (live) or from opening the stream (replay) to the
	// assistant's MESSAGE_END received.
	elapsed   time.Duration
	events    int      // events received, every type
	wireBytes int64    // bytes the subscriber's connections read
	resumes   int      // streams ended with RESOURCE_EXHAUSTED and resumed
	errors    []string // ERROR events
	check     *chunkCheck
	err       error
}

// intactErr is nil when every event and every chunk arrived once and in order.
func (r streamRead) intactErr() error {
	if r.err != nil {
		return r.err
	}
	if r.check == nil {
		return errors.New("not read")
	}
	return r.check.intact()
}

// rate is the read's chunk events per second (0 when it is not intact).
func (r streamRead) rate(count int) float64 {
	if r.intactErr() != nil || r.elapsed <= 0 {
		return 0
	}
	return float64(count) / r.elapsed.Seconds()
}

// runProtocolTurn creates a session, subscribes to it in protocol p, sends one message
// and reads until the assistant's MESSAGE_END; then it reads the turn again, replayed
// from the point before it.
func runProtocolTurn(ctx context.Context, s *server, p subscribeProtocol, workspace string, size, count int) (t protocolTurn) {
	t.live.check = newChunkCheck(size, count)
	fail := func(err error) protocolTurn {
		t.live.err = err
		t.replay.err = fmt.Errorf("no replay: the live read failed: %w", err)
		return t
	}
	created, err := s.client.CreateSession(ctx, &pb.CreateSessionRequest{AgentId: benchACPAgent, Config: &pb.SessionConfig{Workspace: workspace}})
	if err != nil {
		return fail(fmt.Errorf("CreateSession: %w", err))
	}
	id := created.GetSession().GetSessionId()
	defer func() {
		if _, err := s.client.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: id}); err != nil && t.replay.err == nil {
			t.replay.err = fmt.Errorf("CloseSession: %w", err)
		}
	}()
	got, err := s.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
	if err != nil {
		return fail(fmt.Errorf("GetSession: %w", err))
	}
	before := got.GetSession().GetLastSequence()
	var wire atomic.Int64
	open, closeClient, err := p.connect(s.addr, &wire)
	if err != nil {
		return fail(err)
	}
	defer closeClient()
	liveCtx, cancelLive := context.WithCancel(ctx)
	defer cancelLive()
	// No session filter and unmerged deltas: then the stream carries every sequence after
	// the resume point, and a gap can only be a lost event (a filter would skip other
	// sessions' and the agent's events without saying so, and merging would skip the
	// sequences of the deltas it merged). Unmerged, the rows also compare what each
	// protocol costs per event.
	seq := &sequenceCheck{last: before}
	stream, err := open(liveCtx, &pb.SubscribeRequest{Start: after(before), UnmergedDeltas: true})
	if err != nil {
		return fail(fmt.Errorf("Subscribe: %w", err))
	}
	var end time.Time
	done := make(chan error, 1)
	go func() {
		var err error
		end, err = readProtocolTurn(liveCtx, stream, open, seq, &t.live)
		done <- err
	}()
	start := time.Now()
	if _, err := s.client.SendMessage(ctx, &pb.SendMessageRequest{SessionId: id, Content: textContent("go")}); err != nil {
		cancelLive()
		<-done
		return fail(fmt.Errorf("SendMessage: %w", err))
	}
	if err := <-done; err != nil {
		return fail(err)
	}
	t.live.elapsed = end.Sub(start)
	t.live.wireBytes = wire.Load()
	cancelLive()
	t.replay = readReplay(ctx, open, &wire, before, newChunkCheck(size, count))
	return t
}

// readReplay reads a finished turn again from the point before it.
func readReplay(ctx context.Context, open openStream, wire *atomic.Int64, before uint64, check *chunkCheck) streamRead {
	r := streamRead{check: check}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wireBefore := wire.Load()
	start := time.Now()
	stream, err := open(ctx, &pb.SubscribeRequest{Start: after(before), UnmergedDeltas: true})
	if err != nil {
		r.err = fmt.Errorf("Subscribe: %w", err)
		return r
	}
	end, err := readProtocolTurn(ctx, stream, open, &sequenceCheck{last: before}, &r)
	if err != nil {
		r.err = err
		return r
	}
	r.elapsed = end.Sub(start)
	r.wireBytes = wire.Load() - wireBefore
	return r
}

// readProtocolTurn reads frames until the assistant's MESSAGE_END and returns when it
// arrived. A stream that ends with RESOURCE_EXHAUSTED (the subscriber fell a whole queue
// behind) is resumed after the last sequence received, as the API asks clients to.
func readProtocolTurn(ctx context.Context, stream frameStream, open openStream, seq *sequenceCheck, t *streamRead) (time.Time, error) {
	for {
		frame, err := stream.Recv()
		recv := time.Now()
		if status.Code(err) == codes.ResourceExhausted {
			t.resumes++
			if stream, err = open(ctx, &pb.SubscribeRequest{Start: after(seq.last), UnmergedDeltas: true}); err != nil {
				return time.Time{}, fmt.Errorf("resume Subscribe after %d: %w", seq.last, err)
			}
			continue
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("after %d events: %w", t.events, err)
		}
		for _, ev := range frame.GetEvents().GetEvents() {
			if err := seq.take(ev.GetSequence()); err != nil {
				return time.Time{}, err
			}
			t.events++
			switch p := ev.GetPayload().(type) {
			case *pb.AgenticEvent_MessageDelta:
				if p.MessageDelta.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER {
					t.check.feed(p.MessageDelta.GetText(), recv.UnixNano())
				}
			case *pb.AgenticEvent_MessageEnd:
				if p.MessageEnd.GetRole() != pb.MessageRole_MESSAGE_ROLE_USER {
					return recv, nil
				}
			case *pb.AgenticEvent_Error:
				t.errors = append(t.errors, p.Error.GetMessage())
			}
		}
	}
}

// sequenceCheck follows an unfiltered stream's sequences: each must be the one after the
// last, so that every event arrives once and in order.
type sequenceCheck struct{ last uint64 }

func (s *sequenceCheck) take(seq uint64) error {
	if seq != s.last+1 {
		return fmt.Errorf("event %d arrived after event %d (lost, repeated or reordered)", seq, s.last)
	}
	s.last = seq
	return nil
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func countingDial(wire *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: conn, n: wire}, nil
	}
}

// connectNative is the generated Go client on a connection of its own.
func connectNative(addr string, wire *atomic.Int64) (openStream, func(), error) {
	dial := countingDial(wire)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(benchCredentials{}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) }))
	if err != nil {
		return nil, nil, err
	}
	client := pb.NewAgenticServiceClient(conn)
	open := func(ctx context.Context, req *pb.SubscribeRequest) (frameStream, error) {
		stream, err := client.Subscribe(ctx, req)
		if err == nil {
			_, err = stream.Header()
		}
		return stream, err
	}
	return open, func() { conn.Close() }, nil
}

// httpStreaming is a streaming protocol over HTTP: its content type, how it encodes
// messages, and how its last frame says how the stream ended.
type httpStreaming struct {
	contentType string
	marshal     func(proto.Message) ([]byte, error)
	unmarshal   func([]byte, proto.Message) error
	endFlag     byte
	// endErr is the error the end frame's body reports: nil for a stream that ended
	// well, else one with the gRPC status code it names.
	endErr func([]byte) error
}

var (
	connectJSON  = httpStreaming{"application/connect+json", protojson.Marshal, protojson.Unmarshal, 0x02, connectEndErr}
	grpcWebProto = httpStreaming{"application/grpc-web+proto", proto.Marshal, proto.Unmarshal, 0x80, grpcWebTrailerErr}
)

// connectHTTP speaks p with plain net/http over HTTP/1.1, as a browser without HTTP/2
// to the server does.
func connectHTTP(p httpStreaming) func(addr string, wire *atomic.Int64) (openStream, func(), error) {
	return func(addr string, wire *atomic.Int64) (openStream, func(), error) {
		var protocols http.Protocols
		protocols.SetHTTP1(true)
		tr := &http.Transport{DialContext: countingDial(wire), Protocols: &protocols, DisableCompression: true}
		client := &http.Client{Transport: tr}
		url := "http://" + addr + "/" + pb.AgenticService_ServiceDesc.ServiceName + "/Subscribe"
		open := func(ctx context.Context, req *pb.SubscribeRequest) (frameStream, error) {
			msg, err := p.marshal(req)
			if err != nil {
				return nil, err
			}
			hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(envelope(0, msg)))
			if err != nil {
				return nil, err
			}
			hreq.Header.Set("Content-Type", p.contentType)
			hreq.Header.Set("Authorization", "Bearer "+benchToken)
			resp, err := client.Do(hreq)
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != http.StatusOK {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				resp.Body.Close()
				return nil, fmt.Errorf("%s: HTTP %s: %s", p.contentType, resp.Status, body)
			}
			if resp.ProtoMajor != 1 {
				resp.Body.Close()
				return nil, fmt.Errorf("%s: answered over HTTP/%d, want HTTP/1.1", p.contentType, resp.ProtoMajor)
			}
			// gRPC-Web answers an error at once in the headers (trailers-only).
			if code := resp.Header.Get("Grpc-Status"); code != "" && code != "0" {
				resp.Body.Close()
				return nil, grpcWebStatus(code, resp.Header.Get("Grpc-Message"))
			}
			return &httpFrameStream{p: p, body: resp.Body, r: bufio.NewReaderSize(resp.Body, 64<<10)}, nil
		}
		return open, tr.CloseIdleConnections, nil
	}
}

// httpFrameStream reads enveloped messages (a flags byte, a 4-byte big-endian length,
// the message) from a response body.
type httpFrameStream struct {
	p    httpStreaming
	body io.Closer
	r    *bufio.Reader
	buf  []byte
}

func (s *httpFrameStream) Recv() (*pb.SubscribeResponse, error) {
	flags, data, err := readEnvelope(s.r, &s.buf)
	if err != nil {
		s.body.Close()
		if err == io.EOF {
			return nil, fmt.Errorf("%s stream ended without its end frame", s.p.contentType)
		}
		return nil, err
	}
	if flags&s.p.endFlag != 0 {
		s.body.Close()
		if err := s.p.endErr(data); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	msg := &pb.SubscribeResponse{}
	if err := s.p.unmarshal(data, msg); err != nil {
		return nil, fmt.Errorf("decode a %s frame: %w", s.p.contentType, err)
	}
	return msg, nil
}

func envelope(flags byte, msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// readEnvelope reads one enveloped message into *buf (reused while it is large enough).
func readEnvelope(r io.Reader, buf *[]byte) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(head[1:]))
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	data := (*buf)[:n]
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, fmt.Errorf("a frame cut short: %w", io.ErrUnexpectedEOF)
	}
	return head[0], data, nil
}

// connectEndErr reads a Connect end-of-stream message: {"error": {"code", "message"}}
// when the stream failed.
func connectEndErr(data []byte) error {
	var end struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &end); err != nil {
		return fmt.Errorf("a Connect end-of-stream message that is not JSON: %w: %.200q", err, data)
	}
	if end.Error == nil {
		return nil
	}
	code, ok := connectCodes[end.Error.Code]
	if !ok {
		code = codes.Unknown
	}
	return status.Errorf(code, "Connect %s: %s", end.Error.Code, end.Error.Message)
}

// connectCodes are the Connect protocol's names of the gRPC status codes.
var connectCodes = map[string]codes.Code{
	"canceled": codes.Canceled, "unknown": codes.Unknown, "invalid_argument": codes.InvalidArgument,
	"deadline_exceeded": codes.DeadlineExceeded, "not_found": codes.NotFound, "already_exists": codes.AlreadyExists,
	"permission_denied": codes.PermissionDenied, "resource_exhausted": codes.ResourceExhausted,
	"failed_precondition": codes.FailedPrecondition, "aborted": codes.Aborted, "out_of_range": codes.OutOfRange,
	"unimplemented": codes.Unimplemented, "internal": codes.Internal, "unavailable": codes.Unavailable,
	"data_loss": codes.DataLoss, "unauthenticated": codes.Unauthenticated,
}

// grpcWebTrailerErr reads a gRPC-Web trailer frame: HTTP/1-style header lines with
// grpc-status and grpc-message.
func grpcWebTrailerErr(data []byte) error {
	var code, msg string
	for _, line := range strings.Split(string(data), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "grpc-status":
			code = strings.TrimSpace(v)
		case "grpc-message":
			msg = strings.TrimSpace(v)
		}
	}
	if code == "" {
		return fmt.Errorf("a gRPC-Web trailer without grpc-status: %.200q", data)
	}
	if code == "0" {
		return nil
	}
	return grpcWebStatus(code, msg)
}

func grpcWebStatus(code, msg string) error {
	n, err := strconv.ParseUint(code, 10, 32)
	if err != nil {
		return fmt.Errorf("gRPC-Web grpc-status %q is not a number (message %q)", code, msg)
	}
	return status.Errorf(codes.Code(n), "gRPC-Web: %s", msg)
}

// protocolRuns collects one protocol's turns over the runs.
type protocolRuns struct {
	name         string
	live, replay readSeries
}

// readSeries collects one kind of read (live or replay) over the runs.
type readSeries struct {
	total   int
	elapsed []float64 // seconds, intact reads
	ratios  []float64 // this read's rate over native gRPC's in the same run, both intact
	wire    []float64 // bytes read per chunk event
	resumes []float64
	fails   []string
	errors  []string // ERROR events
	lastOK  bool
}

func (s *readSeries) add(what string, r streamRead, nativeRate float64, count int) {
	s.total++
	s.errors = append(s.errors, r.errors...)
	s.lastOK = false
	if err := r.intactErr(); err != nil {
		s.fails = append(s.fails, oneLine(what+": "+err.Error()))
		return
	}
	s.lastOK = true
	s.elapsed = append(s.elapsed, r.elapsed.Seconds())
	s.wire = append(s.wire, float64(r.wireBytes)/float64(count))
	s.resumes = append(s.resumes, float64(r.resumes))
	if nativeRate > 0 {
		s.ratios = append(s.ratios, r.rate(count)/nativeRate)
	}
}

// add records a turn against native gRPC's turn of the same run.
func (r *protocolRuns) add(t, native protocolTurn, count int) {
	r.live.add(r.name+" live", t.live, native.live.rate(count), count)
	r.replay.add(r.name+" replay", t.replay, native.replay.rate(count), count)
}

// last describes the latest run, for progress lines.
func (r *protocolRuns) last(count int) string {
	part := func(s *readSeries) string {
		if !s.lastOK {
			return "not intact"
		}
		e := s.elapsed[len(s.elapsed)-1]
		return fmt.Sprintf("%.0f ms (%s ev/s)", e*1000, si(float64(count)/e))
	}
	return fmt.Sprintf("%s live %s, replay %s", r.name, part(&r.live), part(&r.replay))
}

func (r *protocolRuns) intact() string {
	return fmt.Sprintf("%s %d/%d live, %d/%d replay intact", r.name, len(r.live.elapsed), r.live.total, len(r.replay.elapsed), r.replay.total)
}

// protocolRows renders, for the live reads and then the replays, a row per protocol, and
// a row of intact reads; runs[0] is native gRPC.
func protocolRows(section string, count, size int, runs []*protocolRuns) []Row {
	cmd := commandLine()
	label := fmt.Sprintf("%d × %s chunks", count, sizeLabel(size))
	var intact, fails, errs []string
	allIntact := true
	for _, r := range runs {
		intact = append(intact, r.intact())
		for _, s := range []*readSeries{&r.live, &r.replay} {
			fails = append(fails, s.fails...)
			errs = append(errs, s.errors...)
			allIntact = allIntact && s.total > 0 && len(s.elapsed) == s.total
		}
	}
	runsCell := strings.Join(intact, ", ")
	var rows []Row
	for _, kind := range []struct {
		replay      bool
		figure, ttl string
	}{
		{false, "Subscribe to 1 subscriber, live turn", "SendMessage → MESSAGE_END"},
		{true, "Subscribe replay of the finished turn (after_sequence from before it), 1 subscriber", "Subscribe → MESSAGE_END"},
	} {
		series := func(r *protocolRuns) *readSeries {
			if kind.replay {
				return &r.replay
			}
			return &r.live
		}
		native := series(runs[0])
		for i, r := range runs {
			s := series(r)
			figure := fmt.Sprintf("%s, %s, %s", kind.figure, r.name, label)
			if len(s.elapsed) == 0 {
				rows = append(rows, Row{Section: section, Figure: figure, Value: "no intact read", Met: "no",
					Runs: runsCell, Command: cmd, Notes: failNotes(s.fails)})
				continue
			}
			e := median(s.elapsed)
			row := Row{Section: section, Figure: figure,
				Value: fmt.Sprintf("%s ev/s, %.1f MB/s of text", si(float64(count)/e), float64(count*size)/e/1e6),
				Runs:  runsCell, Command: cmd}
			notes := []string{fmt.Sprintf("%s %.0f ms; %.0f B read from the connection per chunk event", kind.ttl, e*1000, median(s.wire))}
			if res := median(s.resumes); res > 0 {
				notes = append(notes, fmt.Sprintf("the subscriber overflowed its queue and resumed %.0f times per run (median)", res))
			}
			switch {
			case i == 0:
				row.Ratio = "the baseline"
			case len(s.ratios) > 0:
				row.Ratio = fmt.Sprintf("%.2f × native gRPC (median of %d per-run ratio(s), same server and run)", median(s.ratios), len(s.ratios))
			case len(native.elapsed) > 0:
				row.Ratio = fmt.Sprintf("%.2f × native gRPC (medians; no run had both intact)", median(native.elapsed)/e)
			default:
				row.Ratio = "native gRPC: no intact read"
			}
			row.Notes = strings.Join(notes, "; ")
			rows = append(rows, row)
		}
	}
	intactRow := Row{Section: section, Figure: "intact Subscribe streams (every sequence once, in order, all the text), " + label,
		Value: runsCell, Target: "every read intact", Met: metStr(allIntact), Runs: runsCell, Command: cmd,
		Notes: "one agenticd per run, a turn per protocol, their order rotating from run to run; control calls over native gRPC"}
	if n := failNotes(fails); n != "" {
		intactRow.Notes += "; " + n
	}
	if len(errs) > 0 {
		intactRow.Notes += "; ERROR events: " + failNotes(errs)
	}
	return append(rows, intactRow)
}
