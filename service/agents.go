package service

import (
	"context"

	pb "github.com/agenticd/agenticd/gen/go/agentic/v1"

	"github.com/agenticd/agenticd/presenters"
)

func (s *Service) ListAgents(ctx context.Context, _ *pb.ListAgentsRequest) (*pb.ListAgentsResponse, error) {
	resp := &pb.ListAgentsResponse{}
	for _, p := range s.registry.Presenters() {
		resp.Agents = append(resp.Agents, describeAgent(ctx, p))
	}
	return resp, nil
}

func (s *Service) GetAgent(ctx context.Context, req *pb.GetAgentRequest) (*pb.GetAgentResponse, error) {
	const method = "GetAgent"
	agentID := req.GetAgentId()
	if err := required("agent_id", agentID, "one of the agents ListAgents shows"); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	p, err := s.registry.Agent(agentID)
	if err != nil {
		return nil, s.fail(ctx, method, err, "agent_id", agentID)
	}
	return &pb.GetAgentResponse{Agent: describeAgent(ctx, p)}, nil
}

// describeAgent is an agent as its presenter describes it, under its registered id.
func describeAgent(ctx context.Context, p presenters.Presenter) *pb.AgentInfo {
	info := p.Describe(ctx)
	if info.ID == "" {
		info.ID = p.AgentID()
	}
	return agentInfoToPB(info)
}
