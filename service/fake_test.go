package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agenticd/agenticd/presenters"
)

// fakePresenter is an in-memory agent. Its default behaviour is a tiny, synchronous agent
// (CreateSession emits SESSION_CREATED, SendMessage emits a delta and MESSAGE_END before
// it returns); a test overrides any method by setting the matching function field.
type fakePresenter struct {
	id  string
	pub presenters.Publisher

	createFn   func(ctx context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error)
	getFn      func(ctx context.Context, id string) (presenters.SessionInfo, error)
	loadFn     func(ctx context.Context, id string, lc presenters.LoadContext) (presenters.SessionInfo, error)
	sendFn     func(ctx context.Context, id string, c presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error)
	cancelFn   func(ctx context.Context, id, messageID string) (string, error)
	respondFn  func(ctx context.Context, id string, r presenters.PermissionResponse) error
	messagesFn func(ctx context.Context, id string, q presenters.MessageQuery) ([]presenters.Message, error)

	gets atomic.Int32 // GetSession calls

	// caps are added to the capabilities Describe reports.
	caps presenters.Capabilities

	mu        sync.Mutex
	sessions  map[string]*presenters.SessionInfo
	nextID    int
	responses []presenters.PermissionResponse
	// elicitAnswers are the RespondElicitation answers it got.
	elicitAnswers []presenters.ElicitationResponse
	closed        bool
}

var _ presenters.Presenter = (*fakePresenter)(nil)

// creations orders the sessions of all fakes by creation time, a second apart.
var creations atomic.Int64

func newFake(id string, pub presenters.Publisher) *fakePresenter {
	return &fakePresenter{id: id, pub: pub, sessions: map[string]*presenters.SessionInfo{}}
}

func (f *fakePresenter) emitter(sessionID string) presenters.Emitter {
	return presenters.NewEmitter(f.pub, f.id, sessionID)
}

func (f *fakePresenter) AgentID() string { return f.id }

func (f *fakePresenter) Describe(context.Context) presenters.AgentInfo {
	return presenters.AgentInfo{
		ID: f.id, Name: "Fake " + f.id, Type: presenters.AgentTypeDeepChat, Status: presenters.AgentReady,
		Capabilities: presenters.Capabilities{SupportsModes: true, SupportsModels: true,
			SupportsMCP: f.caps.SupportsMCP, SupportsMCPHTTP: f.caps.SupportsMCPHTTP,
			SupportsAdditionalDirectories: f.caps.SupportsAdditionalDirectories},
		AuthMethods: []presenters.AuthMethod{{ID: "login", Name: "Log in"}},
	}
}

func (f *fakePresenter) CreateSession(ctx context.Context, cfg presenters.SessionConfig) (presenters.SessionInfo, error) {
	if f.createFn != nil {
		return f.createFn(ctx, cfg)
	}
	f.mu.Lock()
	f.nextID++
	info := presenters.SessionInfo{
		SessionID:       fmt.Sprintf("%s-s%d", f.id, f.nextID),
		AgentID:         f.id,
		Status:          presenters.SessionIdle,
		Workspace:       cfg.Workspace.Root(),
		Title:           cfg.Title,
		CreatedAt:       time.Unix(1_700_000_000+creations.Add(1), 0),
		AvailableModes:  []presenters.Mode{{ID: "ask"}, {ID: "code"}},
		CurrentModeID:   "ask",
		AvailableModels: []presenters.Model{{ID: "small"}, {ID: "large"}},
		CurrentModelID:  "small",
	}
	f.sessions[info.SessionID] = &info
	f.mu.Unlock()
	created := info
	created.Owner = cfg.Creator // as the presenters do
	f.emitter(info.SessionID).SessionCreated(created)
	return info, nil
}

// ForkSession copies a session under a new id.
func (f *fakePresenter) ForkSession(ctx context.Context, id string) (presenters.SessionInfo, error) {
	f.mu.Lock()
	src, ok := f.sessions[id]
	if !ok {
		f.mu.Unlock()
		return presenters.SessionInfo{}, presenters.ErrNotFound
	}
	f.nextID++
	info := *src
	info.SessionID = fmt.Sprintf("%s-s%d", f.id, f.nextID)
	info.CreatedAt = time.Unix(1_700_000_000+creations.Add(1), 0)
	f.sessions[info.SessionID] = &info
	f.mu.Unlock()
	f.emitter(info.SessionID).SessionCreated(info)
	return info, nil
}

func (f *fakePresenter) GetSession(ctx context.Context, id string) (presenters.SessionInfo, error) {
	f.gets.Add(1)
	if f.getFn != nil {
		return f.getFn(ctx, id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	info, ok := f.sessions[id]
	if !ok {
		return presenters.SessionInfo{}, fmt.Errorf("session %s: %w", id, presenters.ErrNotFound)
	}
	return *info, nil
}

func (f *fakePresenter) LoadSession(ctx context.Context, id string, lc presenters.LoadContext) (presenters.SessionInfo, error) {
	if f.loadFn != nil {
		return f.loadFn(ctx, id, lc)
	}
	info, err := f.GetSession(ctx, id)
	if err != nil {
		return info, err
	}
	f.emitter(id).SessionReady(0)
	return info, nil
}

func (f *fakePresenter) CloseSession(ctx context.Context, id string) error {
	f.mu.Lock()
	info, ok := f.sessions[id]
	if ok {
		info.Status = presenters.SessionClosed
	}
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("session %s: %w", id, presenters.ErrNotFound)
	}
	f.emitter(id).SessionClosed("closed by client")
	return nil
}

// SendMessage echoes the message's first text part as the reply, under the ids opts
// chose (m1 and u1 when empty).
func (f *fakePresenter) SendMessage(ctx context.Context, id string, c presenters.MessageContent, opts presenters.SendOptions) (presenters.SendResult, error) {
	if f.sendFn != nil {
		return f.sendFn(ctx, id, c, opts)
	}
	if _, err := f.GetSession(ctx, id); err != nil {
		return presenters.SendResult{}, err
	}
	text := ""
	for _, p := range c.Parts {
		if p.Text != "" {
			text = p.Text
			break
		}
	}
	res := presenters.SendResult{MessageID: cmp.Or(opts.MessageID, "m1"), UserMessageID: cmp.Or(opts.UserMessageID, "u1")}
	em := f.emitter(id)
	em.MessageDelta(res.MessageID, presenters.RoleAssistant, "echo: "+text)
	em.MessageEnd(presenters.MessageEndPayload{MessageID: res.MessageID, StopReason: presenters.StopEndTurn, Role: presenters.RoleAssistant})
	return res, nil
}

// CancelMessage finds nothing running: it cancels nothing when no message is named and
// refuses a named one.
func (f *fakePresenter) CancelMessage(ctx context.Context, id, messageID string) (string, error) {
	if f.cancelFn != nil {
		return f.cancelFn(ctx, id, messageID)
	}
	if _, err := f.GetSession(ctx, id); err != nil {
		return "", err
	}
	if messageID != "" {
		return "", fmt.Errorf("message %s is not running in session %s: %w", messageID, id, presenters.ErrMessageNotRunning)
	}
	return "", nil
}

func (f *fakePresenter) SetModel(ctx context.Context, id, modelID string) (presenters.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, ok := f.sessions[id]
	if !ok {
		return presenters.SessionInfo{}, presenters.ErrNotFound
	}
	info.CurrentModelID = modelID
	return *info, nil
}

func (f *fakePresenter) SetMode(ctx context.Context, id, modeID string) (presenters.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, ok := f.sessions[id]
	if !ok {
		return presenters.SessionInfo{}, presenters.ErrNotFound
	}
	info.CurrentModeID = modeID
	return *info, nil
}

// SetConfigOption sets the value of one of the session's config options as given: the
// service checks nothing more, so the fake does not either.
func (f *fakePresenter) SetConfigOption(ctx context.Context, id, configID, value string) (presenters.SessionInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, ok := f.sessions[id]
	if !ok {
		return presenters.SessionInfo{}, presenters.ErrNotFound
	}
	opts := slices.Clone(info.ConfigOptions)
	for i := range opts {
		if opts[i].ID == configID {
			opts[i].CurrentValue = value
		}
	}
	info.ConfigOptions = opts
	return *info, nil
}

func (f *fakePresenter) RespondPermission(ctx context.Context, id string, r presenters.PermissionResponse) error {
	if f.respondFn != nil {
		return f.respondFn(ctx, id, r)
	}
	f.mu.Lock()
	f.responses = append(f.responses, r)
	f.mu.Unlock()
	f.emitter(id).PermissionGranted(presenters.PermissionDecision{RequestID: r.RequestID, OptionID: r.OptionID, DecidedBy: presenters.DecidedByUser})
	return nil
}

// RespondElicitation records the answer and resolves the elicitation, as an agent's
// presenter would.
func (f *fakePresenter) RespondElicitation(ctx context.Context, id string, r presenters.ElicitationResponse) error {
	f.mu.Lock()
	f.elicitAnswers = append(f.elicitAnswers, r)
	f.mu.Unlock()
	f.emitter(id).ElicitationResolved(presenters.ElicitationResolvedPayload{ElicitationID: r.ElicitationID, Action: r.Action, Content: r.Content, DecidedBy: presenters.ElicitationByUser})
	return nil
}

func (f *fakePresenter) elicitationAnswers() []presenters.ElicitationResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]presenters.ElicitationResponse(nil), f.elicitAnswers...)
}

func (f *fakePresenter) answered() []presenters.PermissionResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]presenters.PermissionResponse(nil), f.responses...)
}

func (f *fakePresenter) GetMessages(ctx context.Context, id string, q presenters.MessageQuery) ([]presenters.Message, error) {
	if f.messagesFn != nil {
		return f.messagesFn(ctx, id, q)
	}
	_, err := f.GetSession(ctx, id)
	return nil, err
}

func (f *fakePresenter) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// batchingFake is a fakePresenter that also describes its sessions in batches
// (sessionsGetter), counting the batches.
type batchingFake struct {
	*fakePresenter
	batches  atomic.Int32
	batchErr error
}

var _ sessionsGetter = (*batchingFake)(nil)

func (b *batchingFake) GetSessions(_ context.Context, ids []string) ([]presenters.SessionInfo, error) {
	b.batches.Add(1)
	if b.batchErr != nil {
		return nil, b.batchErr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []presenters.SessionInfo
	for _, id := range ids {
		if info, ok := b.sessions[id]; ok {
			out = append(out, *info)
		}
	}
	return out, nil
}
