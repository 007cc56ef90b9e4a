package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agenticd/agenticd/events"
	"github.com/agenticd/agenticd/presenters"
)

// HubStats reads the event hub's load; service.Hub implements it.
type HubStats interface {
	Stats() events.Stats
}

// WatchHub exposes the hub's load, read once per scrape (one short hold of its lock).
func (m *Metrics) WatchHub(h HubStats) { m.reg.MustRegister(hubCollector{h: h}) }

var (
	subscribersDesc = prometheus.NewDesc(Namespace+"_event_subscribers", "Live Subscribe streams.", nil, nil)
	heldEventsDesc  = prometheus.NewDesc(Namespace+"_event_ring_events", "Events held in memory for resuming subscribers.", nil, nil)
	heldBytesDesc   = prometheus.NewDesc(Namespace+"_event_ring_bytes", "Estimated memory of the events held for resuming subscribers.", nil, nil)
	overflowsDesc   = prometheus.NewDesc(Namespace+"_event_subscriber_overflows_total", "Subscribe streams ended with RESOURCE_EXHAUSTED because the subscriber fell behind.", nil, nil)
	backlogDesc     = prometheus.NewDesc(Namespace+"_event_log_backlog_events", "Published events not yet appended to the durable event log.", nil, nil)
	sequenceDesc    = prometheus.NewDesc(Namespace+"_event_last_sequence", "The sequence of the newest event issued.", nil, nil)
	processesDesc   = prometheus.NewDesc(Namespace+"_agent_processes", "Agent processes running, by agent.", []string{"agent_id"}, nil)
)

type hubCollector struct{ h HubStats }

func (c hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{subscribersDesc, heldEventsDesc, heldBytesDesc, overflowsDesc, backlogDesc, sequenceDesc} {
		ch <- d
	}
}

func (c hubCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.h.Stats()
	ch <- prometheus.MustNewConstMetric(subscribersDesc, prometheus.GaugeValue, float64(s.Subscribers))
	ch <- prometheus.MustNewConstMetric(heldEventsDesc, prometheus.GaugeValue, float64(s.HeldEvents))
	ch <- prometheus.MustNewConstMetric(heldBytesDesc, prometheus.GaugeValue, float64(s.HeldBytes))
	ch <- prometheus.MustNewConstMetric(overflowsDesc, prometheus.CounterValue, float64(s.Overflows))
	ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(s.LogBacklog))
	ch <- prometheus.MustNewConstMetric(sequenceDesc, prometheus.GaugeValue, float64(s.LastSequence))
}

// ProcessReporter is an agent that runs processes and can say how many run now. A
// presenter that implements it gets agenticd_agent_processes.
type ProcessReporter interface {
	AgentID() string
	RunningProcesses() int
}

// WatchAgents exposes the running processes of the agents that report them, read at
// scrape time; agents that do not implement ProcessReporter are left out.
func (m *Metrics) WatchAgents(agents []presenters.Presenter) {
	var reporters []ProcessReporter
	for _, a := range agents {
		if r, ok := a.(ProcessReporter); ok {
			reporters = append(reporters, r)
		}
	}
	if len(reporters) > 0 {
		m.reg.MustRegister(processCollector(reporters))
	}
}

type processCollector []ProcessReporter

func (c processCollector) Describe(ch chan<- *prometheus.Desc) { ch <- processesDesc }

func (c processCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c {
		ch <- prometheus.MustNewConstMetric(processesDesc, prometheus.GaugeValue, float64(r.RunningProcesses()), r.AgentID())
	}
}
