package sandbox

import "errors"

// Sentinel errors. Every error returned by this package that one of these
// describes wraps it (test with errors.Is); the wrapping message says which
// path or id was wrong and what to do instead. service/ maps them to gRPC
// codes, presenters/acp to ACP errors (ErrNotFound and ErrTerminalNotFound are
// "resource not found" -32002; the path and argument errors are "invalid params").
var (
	// ErrOutsideWorkspace: a path or cwd resolves outside the workspace.
	ErrOutsideWorkspace = errors.New("path is outside the workspace")
	// ErrNotFound: the file, directory or command does not exist.
	ErrNotFound = errors.New("not found")
	// ErrTooLarge: a read would exceed the configured size cap.
	ErrTooLarge = errors.New("file too large")
	// ErrNotText: the file is not UTF-8 text (invalid UTF-8 or NUL bytes).
	ErrNotText = errors.New("file is not UTF-8 text")
	// ErrInvalidPath: an empty path, a NUL byte, a device/FIFO/socket, a
	// directory where a file is needed (or the reverse), too many symlinks.
	ErrInvalidPath = errors.New("invalid path")
	// ErrInvalidArgument: a request field other than a path is unusable
	// (empty command, bad environment name, bad search pattern or glob).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrWorkspaceNotAllowed: Roots.Open was given a directory that is not an
	// existing directory under a configured workspace root.
	ErrWorkspaceNotAllowed = errors.New("workspace not allowed")
	// ErrTerminalNotFound: the terminal id is unknown or was released.
	ErrTerminalNotFound = errors.New("terminal not found")
	// ErrTooManyTerminals: the workspace already has its cap of unreleased terminals.
	ErrTooManyTerminals = errors.New("too many terminals")
	// ErrTerminalsClosed: Create was called after Terminals.Close (the session ended).
	ErrTerminalsClosed = errors.New("terminals closed")
)
