package service

import (
	"context"
	"fmt"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"

	"github.com/agenticd/agenticd/presenters"
	"github.com/agenticd/agenticd/service/wire"
)

func (s *Service) ListAgents(ctx context.Context, _ *pb.ListAgentsRequest) (*pb.ListAgentsResponse, error) {
	resp := &pb.ListAgentsResponse{}
	for _, p := range s.registry.Presenters() {
		resp.Agents = append(resp.Agents, describeAgent(ctx, p))
	}
	return resp, nil
}

func (s *Service) GetAgent(ctx context.Context, req *pb.GetAgentRequest) (*pb.GetAgentResponse, error) {
	p, err := s.agentNamed(ctx, "GetAgent", req.GetAgentId())
	if err != nil {
		return nil, err
	}
	return &pb.GetAgentResponse{Agent: describeAgent(ctx, p)}, nil
}

// agentNamed is the presenter of a request's agent_id, or the error for the client.
func (s *Service) agentNamed(ctx context.Context, method, agentID string) (presenters.Presenter, error) {
	if err := required("agent_id", agentID, "one of the agents ListAgents shows"); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	p, err := s.registry.Agent(agentID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	return p, nil
}

// agentLogout is a presenter whose agent can log out of its account.
type agentLogout interface {
	Logout(ctx context.Context) error
}

func (s *Service) LogoutAgent(ctx context.Context, req *pb.LogoutAgentRequest) (*pb.LogoutAgentResponse, error) {
	const method = "LogoutAgent"
	agentID := req.GetAgentId()
	p, err := s.agentNamed(ctx, method, agentID)
	if err != nil {
		return nil, err
	}
	l, ok := p.(agentLogout)
	if !ok {
		return nil, s.fail(ctx, method, presenters.WithDetail(fmt.Errorf("agent %s has no account to log out of: %w", agentID, presenters.ErrUnsupported), "unsupported", "logout"), "agent_id", agentID)
	}
	if err := l.Logout(ctx); err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	s.logger.InfoContext(ctx, "agent logged out", "agent_id", agentID)
	return &pb.LogoutAgentResponse{Agent: describeAgent(ctx, p)}, nil
}

// describeAgent is an agent as its presenter describes it, under its registered id.
func describeAgent(ctx context.Context, p presenters.Presenter) *pb.AgentInfo {
	info := p.Describe(ctx)
	if info.ID == "" {
		info.ID = p.AgentID()
	}
	return wire.AgentInfoToPB(info)
}
