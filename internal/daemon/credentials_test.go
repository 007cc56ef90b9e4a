package daemon

import (
	"cmp"
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// clientOptions are a test client's dial options for srv: plain TCP, and the token srv
// accepts (the configured one, else its local token; every call needs one).
func clientOptions(srv *Server) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(cmp.Or(srv.cfg.Token, srv.LocalToken())))}
}

// replicaToken is the token replicas of a test share (a database requires one).
const replicaToken = "replicas-shared-token-0123456789"

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
