// Package metrics is agenticd's Prometheus vocabulary: the metrics derived from the event
// stream (sessions, turns, tokens, permissions, agents), the event hub's load read at
// scrape time, the store's write latency, and the HTTP handler that exposes them. It
// knows nothing of gRPC: the service registers its own RPC metrics on Registry.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every agenticd metric.
const Namespace = "agenticd"

// Metrics holds agenticd's metrics on a registry of its own (never the global one, so
// that tests and several servers in one process do not share counters).
type Metrics struct {
	reg *prometheus.Registry

	eventsPublished  prometheus.Counter
	sessions         *prometheus.GaugeVec
	turns            *prometheus.CounterVec
	turnDuration     *prometheus.HistogramVec
	tokens           *prometheus.CounterVec
	permissionAsked  *prometheus.CounterVec
	permissionDecide *prometheus.CounterVec
	errors           *prometheus.CounterVec
	agentStatus      *prometheus.GaugeVec
	agentCrashes     *prometheus.CounterVec
	agentRestarts    *prometheus.CounterVec
	storeWrites      *prometheus.HistogramVec

	events *eventState
}

// New returns the metrics on a fresh registry, with the Go runtime's and the process's
// own metrics (go_*, process_*).
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		eventsPublished: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace,
			Name: "events_published_total", Help: "Events published by the event hub."}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace,
			Name: "sessions", Help: "Sessions with events since start-up that are not closed, by status."}, []string{"status"}),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
			Name: "turns_total", Help: "Turns (assistant messages) ended, by agent and stop reason."}, []string{"agent_id", "stop_reason"}),
		turnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace,
			Name: "turn_duration_seconds", Help: "Time from a turn's first event to its MESSAGE_END, by agent.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}}, []string{"agent_id"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
			Name: "tokens_total", Help: "Tokens the agents reported at the end of turns, by agent, model and type (input, output)."},
			[]string{"agent_id", "model", "type"}),
		permissionAsked: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
			Name: "permission_requests_total", Help: "Permission requests shown to clients, by agent."}, []string{"agent_id"}),
		permissionDecide: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
			Name: "permission_decisions_total", Help: "Permission decisions, by agent, outcome (granted, denied) and who decided (user, policy, cancelled)."},
			[]string{"agent_id", "outcome", "decided_by"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
			Name: "errors_total", Help: "ERROR events, by agent and code."}, []string{"agent_id", "code"}),
		agentStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace,
			Name: "agent_status", Help: "1 for each agent's current status (not_started, starting, ready, needs_auth, needs_configuration, crashed), as its last AGENT_STATUS_CHANGED said."},
			[]string{"agent_id", "status"}),
		agentCrashes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
			Name: "agent_crashes_total", Help: "Times an agent turned crashed (its process ended unasked, or failed to start)."}, []string{"agent_id"}),
		agentRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
			Name: "agent_restarts_total", Help: "Times an agent turned ready again after a crash."}, []string{"agent_id"}),
		storeWrites: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace,
			Name: "store_write_duration_seconds", Help: "Database writes, waiting for the write lock included, by operation.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}}, []string{"op"}),
	}
	m.events = newEventState(m)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.eventsPublished, m.sessions, m.turns, m.turnDuration, m.tokens, m.permissionAsked, m.permissionDecide,
		m.errors, m.agentStatus, m.agentCrashes, m.agentRestarts, m.storeWrites,
	)
	return m
}

// Registry is where further collectors go (the service's RPC metrics).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveWrite records one database write; it is the store's write observer.
func (m *Metrics) ObserveWrite(op string, d time.Duration) {
	m.storeWrites.WithLabelValues(op).Observe(d.Seconds())
}
