package main

import (
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"github.com/agenticd/agenticd/internal/version"
)

func cmdAgents(c *cli, args []string) error {
	if _, err := c.parse(flag.NewFlagSet("agents", flag.ContinueOnError), args); err != nil {
		return err
	}
	ctx, cancel := c.call()
	defer cancel()
	resp, err := c.client.ListAgents(ctx, &pb.ListAgentsRequest{})
	if err != nil {
		return err
	}
	if len(resp.GetAgents()) == 0 {
		fmt.Fprintln(c.stderr, "no agents are configured; add some under agents: in agenticd's config file")
		return nil
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTYPE\tSTATUS\tNAME\tSOURCE\tIMPLEMENTATION\tNOTE")
	for _, a := range resp.GetAgents() {
		note := a.GetStatusReason()
		if len(a.GetAuthMethods()) > 0 && a.GetStatus() == pb.AgentStatus_AGENT_STATUS_NEEDS_AUTH {
			var ids []string
			for _, m := range a.GetAuthMethods() {
				ids = append(ids, m.GetId())
			}
			note = strings.TrimSpace(note + " auth methods: " + strings.Join(ids, ", "))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.GetAgentId(), enumName(a.GetType().String(), "AGENT_TYPE_"),
			enumName(a.GetStatus().String(), "AGENT_STATUS_"), a.GetName(), a.GetConfigSource(), describeImplementation(a.GetImplementation()), note)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// The boundary is the server's, so it is the same for every agent: one line says it.
	var states []string
	for _, a := range resp.GetAgents() {
		if st := a.GetConfinement(); st != "" && !slices.Contains(states, st) {
			states = append(states, st)
		}
	}
	for _, st := range states {
		fmt.Fprintf(c.stdout, "confinement: %s\n", st)
	}
	return nil
}

// describeImplementation is "name version" of what the agent says it runs ("" when it
// said nothing).
func describeImplementation(i *pb.Implementation) string {
	return strings.TrimSpace(i.GetName() + " " + i.GetVersion())
}

func cmdSessions(c *cli, args []string) error {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	agent := fs.String("agent", "", "only this agent's sessions")
	limit := fs.Int("limit", 50, "at most this many sessions")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *limit <= 0 {
		return usagef("--limit must be positive")
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tAGENT\tSTATUS\tCREATED\tUPDATED\tWORKSPACE\tTITLE")
	token, shown := "", 0
	for shown < *limit {
		ctx, cancel := c.call()
		resp, err := c.client.ListSessions(ctx, &pb.ListSessionsRequest{AgentId: *agent, PageSize: int32(min(*limit-shown, 1000)), PageToken: token})
		cancel()
		if err != nil {
			return err
		}
		for _, s := range resp.GetSessions() {
			status := enumName(s.GetStatus().String(), "SESSION_STATUS_")
			if s.GetStatusReason() != "" {
				status += " (" + s.GetStatusReason() + ")"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.GetSessionId(), s.GetAgentId(), status,
				s.GetCreateTime().AsTime().Local().Format(time.DateTime), s.GetUpdateTime().AsTime().Local().Format(time.DateTime),
				s.GetWorkspace(), s.GetTitle())
			shown++
		}
		token = resp.GetNextPageToken()
		if token == "" {
			break
		}
	}
	return w.Flush()
}

func cmdNew(c *cli, args []string) error {
	fs := flag.NewFlagSet("new", flag.ContinueOnError)
	agent := fs.String("agent", "", "agent id (see `agenticctl agents`)")
	workspace := fs.String("workspace", "", "directory under one of agenticd's workspace_roots (. is this one)")
	model := fs.String("model", "", "model id (default: the agent's)")
	mode := fs.String("mode", "", "mode id (default: the agent's)")
	title := fs.String("title", "", "session title")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *agent == "" || *workspace == "" {
		return usagef("--agent and --workspace are required")
	}
	// agenticd resolves nothing against this shell's directory: send it absolute.
	dir, err := filepath.Abs(*workspace)
	if err != nil {
		return fmt.Errorf("--workspace %s: %w", *workspace, err)
	}
	ctx, cancel := c.call()
	defer cancel()
	resp, err := c.client.CreateSession(ctx, &pb.CreateSessionRequest{
		AgentId:   *agent,
		Config:    &pb.SessionConfig{Workspace: dir, ModelId: *model, ModeId: *mode, Title: *title},
		RequestId: uuid.NewString(),
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, resp.GetSession().GetSessionId())
	return nil
}

func cmdGet(c *cli, args []string) error {
	pos, err := c.parse(flag.NewFlagSet("get", flag.ContinueOnError), args, "SESSION")
	if err != nil {
		return err
	}
	ctx, cancel := c.call()
	defer cancel()
	resp, err := c.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: pos[0]})
	if err != nil {
		return err
	}
	out, err := protojson.MarshalOptions{Multiline: true}.Marshal(resp.GetSession())
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, string(out))
	return nil
}

func cmdMessages(c *cli, args []string) error {
	fs := flag.NewFlagSet("messages", flag.ContinueOnError)
	limit := fs.Int("limit", 0, "only the newest N messages (0: all)")
	pos, err := c.parse(fs, args, "SESSION")
	if err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	messages, err := c.listMessages(pos[0], *limit)
	if err != nil {
		return err
	}
	for _, m := range messages {
		fmt.Fprintf(c.stdout, "── %s %s (%s)\n", enumName(m.GetRole().String(), "MESSAGE_ROLE_"), m.GetMessageId(),
			enumName(m.GetStatus().String(), "MESSAGE_STATUS_"))
		for _, b := range m.GetBlocks() {
			fmt.Fprintln(c.stdout, describeBlock(b))
		}
	}
	return nil
}

// listMessages reads a session's history page by page, oldest first: all of it, or (limit
// > 0) the newest limit messages.
func (c *cli) listMessages(sessionID string, limit int) ([]*pb.SessionMessage, error) {
	req := &pb.ListMessagesRequest{SessionId: sessionID}
	if limit > 0 {
		req.Order = pb.MessageOrder_MESSAGE_ORDER_NEWEST_FIRST
	}
	var messages []*pb.SessionMessage
	for limit == 0 || len(messages) < limit {
		if limit > 0 {
			req.PageSize = int32(min(limit-len(messages), math.MaxInt32))
		}
		ctx, cancel := c.call()
		resp, err := c.client.ListMessages(ctx, req)
		cancel()
		if err != nil {
			return nil, err
		}
		messages = append(messages, resp.GetMessages()...)
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	if limit > 0 {
		messages = messages[:min(len(messages), limit)]
		slices.Reverse(messages)
	}
	return messages, nil
}

func cmdApprove(c *cli, args []string) error { return c.answer("approve", args, true) }

func cmdDeny(c *cli, args []string) error { return c.answer("deny", args, false) }

func (c *cli) answer(name string, args []string, allow bool) error {
	pos, err := c.parse(flag.NewFlagSet(name, flag.ContinueOnError), args, "SESSION", "PERMISSION_ID")
	if err != nil {
		return err
	}
	done, err := c.respond(pos[0], pos[1], allow, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, done)
	return nil
}

// respond answers a permission request with its allow (or reject) option: the "once" kind
// when offered, else the "always" kind. options are the request's, when the caller has
// them (else they are read from GetSession). It returns what it did, as a line for people.
func (c *cli) respond(sessionID, permissionID string, allow bool, options []*pb.PermissionOption) (string, error) {
	kinds := []pb.PermissionOptionKind{pb.PermissionOptionKind_PERMISSION_OPTION_KIND_REJECT_ONCE, pb.PermissionOptionKind_PERMISSION_OPTION_KIND_REJECT_ALWAYS}
	if allow {
		kinds = []pb.PermissionOptionKind{pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ONCE, pb.PermissionOptionKind_PERMISSION_OPTION_KIND_ALLOW_ALWAYS}
	}
	if options == nil {
		// Without the request's options (it is not pending), the server's answer says why.
		ctx, cancel := c.call()
		s, err := c.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: sessionID})
		cancel()
		if err == nil {
			for _, p := range s.GetSession().GetPendingPermissions() {
				if p.GetPermissionId() == permissionID {
					options = p.GetOptions()
				}
			}
		}
	}
	if chosen := pickOption(options, kinds); chosen != nil {
		return c.answerWith(sessionID, permissionID, chosen)
	}
	ctx, cancel := c.call()
	defer cancel()
	if _, err := c.client.RespondPermission(ctx, &pb.RespondPermissionRequest{SessionId: sessionID, PermissionId: permissionID,
		Answer: &pb.RespondPermissionRequest_OptionKind{OptionKind: kinds[0]}, RequestId: uuid.NewString()}); err != nil {
		return "", err
	}
	return answerLine(sessionID, permissionID, kinds[0], nil), nil
}

// answerWith answers a permission request with one of its options and returns what it
// did, as a line for people.
func (c *cli) answerWith(sessionID, permissionID string, o *pb.PermissionOption) (string, error) {
	ctx, cancel := c.call()
	defer cancel()
	if _, err := c.client.RespondPermission(ctx, &pb.RespondPermissionRequest{SessionId: sessionID, PermissionId: permissionID,
		Answer: &pb.RespondPermissionRequest_OptionId{OptionId: o.GetOptionId()}, RequestId: uuid.NewString()}); err != nil {
		return "", err
	}
	return answerLine(sessionID, permissionID, o.GetKind(), o), nil
}

// pickOption is the first option of the first of kinds that the options offer (nil when
// none is).
func pickOption(options []*pb.PermissionOption, kinds []pb.PermissionOptionKind) *pb.PermissionOption {
	for _, k := range kinds {
		for _, o := range options {
			if o.GetKind() == k {
				return o
			}
		}
	}
	return nil
}

func cmdCancel(c *cli, args []string) error {
	pos, err := c.parse(flag.NewFlagSet("cancel", flag.ContinueOnError), args, "SESSION")
	if err != nil {
		return err
	}
	ctx, cancel := c.call()
	defer cancel()
	_, err = c.client.CancelMessage(ctx, &pb.CancelMessageRequest{SessionId: pos[0], RequestId: uuid.NewString()})
	return err
}

func cmdMode(c *cli, args []string) error {
	pos, err := c.parse(flag.NewFlagSet("mode", flag.ContinueOnError), args, "SESSION", "MODE_ID")
	if err != nil {
		return err
	}
	ctx, cancel := c.call()
	defer cancel()
	resp, err := c.client.SetMode(ctx, &pb.SetModeRequest{SessionId: pos[0], ModeId: pos[1]})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, resp.GetSession().GetCurrentModeId())
	return nil
}

func cmdModel(c *cli, args []string) error {
	pos, err := c.parse(flag.NewFlagSet("model", flag.ContinueOnError), args, "SESSION", "MODEL_ID")
	if err != nil {
		return err
	}
	ctx, cancel := c.call()
	defer cancel()
	resp, err := c.client.SetModel(ctx, &pb.SetModelRequest{SessionId: pos[0], ModelId: pos[1]})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, resp.GetSession().GetCurrentModelId())
	return nil
}

func cmdFork(c *cli, args []string) error {
	pos, err := c.parse(flag.NewFlagSet("fork", flag.ContinueOnError), args, "SESSION")
	if err != nil {
		return err
	}
	ctx, cancel := c.call()
	defer cancel()
	resp, err := c.client.ForkSession(ctx, &pb.ForkSessionRequest{SessionId: pos[0]})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, resp.GetSession().GetSessionId())
	return nil
}

// cmdConfig lists a session's config options, or sets one.
func cmdConfig(c *cli, args []string) error {
	pos, err := c.parse(flag.NewFlagSet("config", flag.ContinueOnError), args, "SESSION", "...")
	if err != nil {
		return err
	}
	if len(pos) != 1 && len(pos) != 3 {
		return usagef("expected SESSION, or SESSION ID VALUE")
	}
	ctx, cancel := c.call()
	defer cancel()
	if len(pos) == 3 {
		resp, err := c.client.SetConfigOption(ctx, &pb.SetConfigOptionRequest{SessionId: pos[0], ConfigId: pos[1], Value: pos[2]})
		if err != nil {
			return err
		}
		for _, o := range resp.GetSession().GetConfigOptions() {
			if o.GetId() == pos[1] {
				fmt.Fprintf(c.stdout, "%s=%s\n", o.GetId(), o.GetCurrentValue())
			}
		}
		return nil
	}
	resp, err := c.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: pos[0]})
	if err != nil {
		return err
	}
	for _, o := range resp.GetSession().GetConfigOptions() {
		fmt.Fprintln(c.stdout, configOptionLine(o))
	}
	return nil
}

// configOptionLine shows a config option: id=value, its name and category, and the
// values it takes.
func configOptionLine(o *pb.ConfigOption) string {
	about := o.GetName()
	if o.GetCategory() != "" {
		about += ", " + o.GetCategory()
	}
	values := []string{"true", "false"}
	if o.GetType() != pb.ConfigOptionType_CONFIG_OPTION_TYPE_BOOLEAN {
		values = values[:0]
		for _, ch := range o.GetChoices() {
			values = append(values, ch.GetValue())
		}
	}
	return fmt.Sprintf("%s=%s\t(%s)\t%s", o.GetId(), o.GetCurrentValue(), about, strings.Join(values, " | "))
}

func cmdLoad(c *cli, args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	maxHistory := fs.Int("max-history", 0, "replay at most the newest N messages (0: all)")
	pos, err := c.parse(fs, args, "SESSION")
	if err != nil {
		return err
	}
	s, err := c.load(pos[0], *maxHistory)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "reopened session %s: %s, %s\n", s.GetSessionId(), enumName(s.GetStatus().String(), "SESSION_STATUS_"), storedMessages(s.GetMessageCount()))
	return nil
}

func cmdClose(c *cli, args []string) error {
	pos, err := c.parse(flag.NewFlagSet("close", flag.ContinueOnError), args, "SESSION")
	if err != nil {
		return err
	}
	ctx, cancel := c.call()
	defer cancel()
	_, err = c.client.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: pos[0]})
	return err
}

// enumName shortens an enum value's name: AGENT_STATUS_READY -> ready.
func enumName(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

func cmdVersion(c *cli, args []string) error {
	if len(args) > 0 {
		return usagef("version takes no arguments")
	}
	fmt.Fprintln(c.stdout, version.String("agenticctl"))
	return nil
}

// cmdWeb prints a one-time link that signs a browser in to the web page. Through the
// local socket the server says its own address; through --addr that address is used.
func cmdWeb(c *cli, args []string) error {
	if _, err := c.parse(flag.NewFlagSet("web", flag.ContinueOnError), args); err != nil {
		return err
	}
	ctx, cancel := c.call()
	defer cancel()
	resp, err := c.client.CreateWebLogin(ctx, &pb.CreateWebLoginRequest{})
	if err != nil {
		return err
	}
	link := resp.GetUrl()
	if !strings.HasPrefix(c.target, "unix://") || link == "" {
		scheme := "http"
		if c.tls || c.caFile != "" {
			scheme = "https"
		}
		link = scheme + "://" + c.target + resp.GetPath()
	}
	fmt.Fprintln(c.stdout, link)
	fmt.Fprintf(c.stderr, "open it in your browser before %s: it signs that browser in, once\n", resp.GetExpireTime().AsTime().Local().Format("15:04"))
	return nil
}
