// Package sandbox confines the file and terminal operations an agent asks
// for to one session's workspace. It serves ACP fs/* and terminal/* and
// DeepChat's file and command tools. It runs on Linux.
//
// # Workspaces
//
// Roots holds the configured workspace roots (made absolute, symlinks
// resolved). Roots.Open accepts only an existing directory at or below a
// root and records the directory's device and inode; every later operation
// re-opens the workspace and checks that identity, so a workspace directory
// replaced by something else (for instance a symlink to /) is refused.
//
// # Paths
//
// Workspace.Resolve walks a path one component at a time from the
// workspace root (relative paths) or from / (absolute ones), with Lstat and
// Readlink, exactly as the kernel would: a symlink's target is spliced in
// and walked in turn (at most 40 links), ".." after a symlink goes to the
// parent of its target, and for a path that does not exist yet the deepest
// existing directory is resolved and the rest appended. Only where the
// path finally lands matters: anything outside the workspace, however it
// is spelled, is ErrOutsideWorkspace, and when the walk fails while it is
// outside, the error says only that, so errors cannot probe the layout
// beyond the workspace. Empty paths, NUL bytes, devices, FIFOs and sockets
// are ErrInvalidPath.
//
// Resolve is a check; the operations do not trust its answer to still hold
// when they act. Each one then works through an os.Root opened on the
// workspace: os.Root walks every component with openat(O_NOFOLLOW) from the
// root's descriptor and refuses to leave it, so a symlink or directory
// swapped in between the check and the use cannot redirect a read, write,
// mkdir, rename or listing outside the workspace. Reads open with
// O_NONBLOCK and check on the open descriptor that it is a regular file, so
// a FIFO swapped in cannot block or feed them. What remains outside this
// package's reach: hard links to outside files (a hard link is the file),
// bind mounts, and device nodes created inside the workspace by someone
// privileged enough to do so between check and open.
//
// # Files
//
// ReadTextFile follows ACP fs/read_text_file: Line is 1-based, Limit a line
// count; lines keep their terminators. At most Options.MaxReadBytes (10 MiB)
// are scanned (ErrTooLarge beyond), and the text must be UTF-8 without NUL
// bytes (ErrNotText). WriteTextFile creates parent directories and writes
// atomically: a temporary file in the target's directory, fsync, rename over
// the target, fsync of the directory. A replaced file keeps its permission
// bits. Writing through a symlink writes its target, which must be inside.
//
// # Terminals
//
// A terminal runs its command directly with its arguments (never a joined
// string), or, when the request has no arguments, the command as a shell
// line under /bin/sh -c (what agents send). It gets the server's
// environment plus the request's, a pty for stdout and stderr (output
// post-processing off, so bytes arrive unchanged), /dev/null for stdin, and
// its own session and process group. The cwd is resolved like any path and
// then entered through a descriptor opened inside the workspace
// (/proc/self/fd/N as the child's directory), so it cannot be swapped out
// between the check and the chdir. Each workspace directory has a cap on
// unreleased terminals, shared by all its sessions.
//
// Output keeps the newest OutputByteLimit bytes, cut at a UTF-8 character
// boundary, and is always valid UTF-8. Kill sends SIGKILL to the whole
// process group; Release kills, closes the pty and waits until the process
// is reaped and the reader goroutine has ended; Close releases all. A
// process that leaves the group on purpose (setsid, daemons) is beyond a
// group kill; closing the pty on Release hangs up its terminal and ends our
// reader regardless.
//
// The terminal confines where a command starts, not what it may do: it is
// not a container. Which commands run at all is decided before this package
// by the session's permission policy.
package sandbox
