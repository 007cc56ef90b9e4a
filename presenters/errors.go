package presenters

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Presenters wrap them with detail (fmt.Errorf("...: %w", ErrX)); the
// service maps each to one transport code and shows the wrapped message to the client,
// so the detail must say what was wrong and what to do, and must not leak internals.
var (
	// ErrNotFound: unknown agent, session, message or permission request.
	ErrNotFound = errors.New("not found")
	// ErrInvalidArgument: a bad argument (empty message, mode id not offered...).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrSessionBusy: a turn is already running in the session.
	ErrSessionBusy = errors.New("session busy")
	// ErrFailedPrecondition: the agent or session is not in a state to do this (agent
	// not configured, session closed).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrAuthRequired: the agent needs a login the config does not provide. Use
	// AuthRequiredError to carry the agent's methods.
	ErrAuthRequired = errors.New("agent requires authentication")
	// ErrAgentUnavailable: the agent process is gone or could not start.
	ErrAgentUnavailable = errors.New("agent unavailable")
	// ErrCancelled: the caller cancelled.
	ErrCancelled = errors.New("cancelled")
	// ErrUnsupported: the agent cannot do this at all (e.g. load without session/load
	// and without a stored transcript).
	ErrUnsupported = errors.New("not supported by this agent")
	// ErrSessionClosed: the session is closed or in error; LoadSession reopens it.
	ErrSessionClosed = fmt.Errorf("session closed: %w", ErrFailedPrecondition)
	// ErrWorkspaceGone: a stored session's workspace failed its re-check (ReopenWorkspace).
	ErrWorkspaceGone = fmt.Errorf("workspace gone: %w", ErrFailedPrecondition)
	// ErrMessageIDInUse: a client-chosen message id is taken in the session.
	ErrMessageIDInUse = errors.New("message id in use")
	// ErrMessageNotRunning: a cancel named a message that is not the running turn.
	ErrMessageNotRunning = errors.New("message not running")
)

// DetailError adds a fact a client may act on (the message id in use, the method an
// agent lacks) to an error; the service puts it in the error's ErrorInfo metadata.
type DetailError struct {
	Key, Value string
	Err        error
}

func (e *DetailError) Error() string { return e.Err.Error() }
func (e *DetailError) Unwrap() error { return e.Err }

// WithDetail is err with key = value for its ErrorInfo metadata.
func WithDetail(err error, key, value string) error {
	return &DetailError{Key: key, Value: value, Err: err}
}

// AuthRequiredError is ErrAuthRequired with the methods the agent offers. Keys, when
// the agent offers no method, are the API-key variables it reads, none of which reaches
// it: the login it lacks is one of them.
type AuthRequiredError struct {
	AgentID string
	Methods []AuthMethod
	Keys    []string
}

func (e *AuthRequiredError) Error() string {
	if len(e.Methods) == 0 {
		if len(e.Keys) > 0 {
			return "agent " + e.AgentID + " requires authentication and none of the API keys it reads (" + strings.Join(e.Keys, ", ") +
				") reaches it: set one for agenticd (the agent keeps its own keys), or name the variable holding it with api_key_env, " +
				"or set it in the agent's env:"
		}
		return "agent " + e.AgentID + " requires authentication and offers no auth method: log in with the agent itself, " +
			"or give it its key with api_key_env or in its env:"
	}
	msg := "agent " + e.AgentID + " requires authentication; set auth_method in its config to one of:"
	for i, m := range e.Methods {
		if i > 0 {
			msg += ","
		}
		msg += " " + m.ID
	}
	return msg
}

func (e *AuthRequiredError) Unwrap() error { return ErrAuthRequired }
