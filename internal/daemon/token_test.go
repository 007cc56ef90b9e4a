package daemon

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"
)

const strongToken = "3f9a1c0e7b24d6a85e1f0c9b7a3d2e4f6a8b0c1d2e3f4a5b"

// A token nobody can send, or anybody could guess, is refused at start, on loopback as
// much as beyond it, saying what is wrong and how to make a good one.
func TestValidateRefusesWeakTokens(t *testing.T) {
	weak := map[string]struct {
		token string
		says  string
	}{
		"spaces only":          {"                    ", "whitespace characters and nothing else"},
		"a newline only":       {"\n", "whitespace characters and nothing else"},
		"8 characters":         {"s3cr3t!!", "token is 8 characters"},
		"15 characters":        {"0123456789abcde", "token is 15 characters"},
		"one repeated":         {"aaaaaaaaaaaaaaaaaaaaaaaa", "only 1 different"},
		"four different":       {"abcdabcdabcdabcdabcd", "only 4 different"},
		"trailing newline":     {strongToken + "\n", "ends with whitespace"},
		"leading space":        {" " + strongToken, "begins or ends with whitespace"},
		"a tab inside":         {strongToken[:20] + "\t" + strongToken[20:], `'\t' at byte 20`},
		"not ASCII":            {strongToken + "é", "printable ASCII"},
		"a control character":  {strongToken + "\x00x", "printable ASCII"},
		"a newline inside too": {strongToken[:8] + "\n" + strongToken[8:], "printable ASCII"},
	}
	for _, listen := range []string{"0.0.0.0:50051", "127.0.0.1:50051"} {
		for name, c := range weak {
			cfg := testConfig(t)
			cfg.Listen, cfg.Token = listen, c.token
			cfg, err := cfg.WithDefaults()
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			if err == nil {
				t.Errorf("%s on %s: accepted", name, listen)
				continue
			}
			for _, want := range []string{c.says, "at least 16 random characters", "openssl rand -hex 24"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s on %s: %q does not say %q", name, listen, err, want)
				}
			}
			if strings.Contains(err.Error(), strings.TrimSpace(c.token)) && strings.TrimSpace(c.token) != "" {
				t.Errorf("%s on %s: %q shows the token", name, listen, err)
			}
		}
	}
	strong := []string{
		strongToken,
		"0123456789abcdef",             // 16 characters
		"correct horse battery staple", // spaces inside are sent as they are
		"Zm9vYmFyYmF6cXV4+/==",         // base64
	}
	for _, token := range strong {
		cfg := testConfig(t)
		cfg.Listen, cfg.Token = "0.0.0.0:50051", token
		cfg, err := cfg.WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("token %q: %v", token, err)
		}
	}
}

// Start refuses a weak token before it opens anything.
func TestStartRefusesWeakToken(t *testing.T) {
	cfg := testConfig(t)
	cfg.Token = "   "
	if srv, err := Start(context.Background(), cfg, quiet); err == nil {
		_ = srv.Stop(context.Background())
		t.Fatal("a token of spaces started agenticd, and no client could ever authenticate")
	} else if !strings.Contains(err.Error(), "nothing else") {
		t.Errorf("a token of spaces: %v", err)
	}
}

// A token read from a file with its newline (AGENTICD_TOKEN from an env file or a secret)
// is the token without it: clients that send it are let in.
func TestTrimmedTokenLetsClientsIn(t *testing.T) {
	for given, want := range map[string]string{
		strongToken + "\n":        strongToken,
		"\t " + strongToken + " ": strongToken,
		strongToken:               strongToken,
		"  \n":                    "  \n", // kept for Validate to refuse
	} {
		if got := TrimToken(given); got != want {
			t.Errorf("TrimToken(%q) = %q, want %q", given, got, want)
		}
	}

	cfg := testConfig(t)
	cfg.Token = TrimToken(strongToken + "\r\n")
	srv, err := Start(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop(context.Background()) }()
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+strongToken)
	if _, err := pb.NewAgenticServiceClient(conn).ListAgents(ctx, &pb.ListAgentsRequest{}); err != nil {
		t.Errorf("with the token as the file held it, less its newline: %v", err)
	}
	if _, err := pb.NewAgenticServiceClient(conn).ListAgents(context.Background(), &pb.ListAgentsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("without a token: %v, want UNAUTHENTICATED", err)
	}
}
