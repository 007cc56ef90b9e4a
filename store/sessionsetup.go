package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/agenticd/agenticd/presenters"
)

// SessionSetup is what a session was created with beyond its workspace, kept so that
// loading it again (after a restart) brings them back. The MCP servers' env and headers
// may hold credentials: they stay in the database, which no session can reach.
type SessionSetup struct {
	SessionID             string
	AdditionalDirectories []string
	MCPServers            []presenters.MCPServer
}

// mcpServerJSON is the stored form of an MCP server; its field names are the stored
// format's, independent of the Go type's.
type mcpServerJSON struct {
	Name    string            `json:"name"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// SaveSessionSetup stores a session's setup, replacing what was stored for it. A setup
// with neither directories nor servers stores nothing (SessionSetup reads it as empty).
func (s *Store) SaveSessionSetup(ctx context.Context, setup SessionSetup) (err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	if len(setup.AdditionalDirectories) == 0 && len(setup.MCPServers) == 0 {
		return nil
	}
	dirs, err := json.Marshal(nonNil(setup.AdditionalDirectories))
	if err != nil {
		return fmt.Errorf("encode the additional directories of session %s: %w", setup.SessionID, err)
	}
	servers := make([]mcpServerJSON, len(setup.MCPServers))
	for i, m := range setup.MCPServers {
		servers[i] = mcpServerJSON(m)
	}
	encoded, err := json.Marshal(servers)
	if err != nil {
		return fmt.Errorf("encode the MCP servers of session %s: %w", setup.SessionID, err)
	}
	return s.write(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO session_setups (session_id, additional_directories, mcp_servers) VALUES (?, ?, ?)
			ON CONFLICT (session_id) DO UPDATE SET additional_directories = excluded.additional_directories, mcp_servers = excluded.mcp_servers`,
			setup.SessionID, string(dirs), string(encoded)).Error
	})
}

// SessionSetup returns what SaveSessionSetup stored for a session; a session with none
// stored has an empty setup, and no error.
func (s *Store) SessionSetup(ctx context.Context, sessionID string) (_ SessionSetup, err error) {
	ctx, done := s.call(ctx)
	defer done(&err)
	setup := SessionSetup{SessionID: sessionID}
	var dirs, servers string
	err = s.sqlDB.QueryRowContext(ctx, s.dialect.rebind(`SELECT additional_directories, mcp_servers FROM session_setups WHERE session_id = ?`), sessionID).Scan(&dirs, &servers)
	if errors.Is(err, sql.ErrNoRows) {
		return setup, nil
	}
	if err != nil {
		return setup, fmt.Errorf("read the setup of session %s: %w", sessionID, err)
	}
	if err := json.Unmarshal([]byte(dirs), &setup.AdditionalDirectories); err != nil {
		return setup, fmt.Errorf("decode the additional directories of session %s: %w", sessionID, err)
	}
	var stored []mcpServerJSON
	if err := json.Unmarshal([]byte(servers), &stored); err != nil {
		return setup, fmt.Errorf("decode the MCP servers of session %s: %w", sessionID, err)
	}
	for _, m := range stored {
		setup.MCPServers = append(setup.MCPServers, presenters.MCPServer(m))
	}
	return setup, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
