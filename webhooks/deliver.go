package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery (docs/webhooks.md).
const (
	SignatureHeader = "Agenticd-Signature"
	DeliveryHeader  = "Agenticd-Delivery"
	EventHeader     = "Agenticd-Event"
)

// Recorder keeps delivery records (the audit log).
type Recorder interface {
	RecordDeliveries(ctx context.Context, records []Record) error
}

// notice is the body of a delivery: ids, the type and times only, so that nothing a
// receiver or a proxy on the way logs can leak what a session holds.
type notice struct {
	// ID is the delivery's id (DeliveryHeader): a receiver drops a repeat it has seen.
	ID        string    `json:"id"`
	Type      Kind      `json:"type"`
	Time      time.Time `json:"time"`
	SessionID string    `json:"session_id,omitempty"`
	AgentID   string    `json:"agent_id,omitempty"`
	Sequence  uint64    `json:"sequence"`
	MessageID string    `json:"message_id,omitempty"`
	// RequestID is the permission request's or the elicitation's id.
	RequestID string `json:"request_id,omitempty"`
}

// delivery is one notice to one hook, with its attempts so far.
type delivery struct {
	id       string
	target   *target
	notice   notice
	attempts int
	first    time.Time // of the first attempt
	next     time.Time // when the next attempt is due
}

// Sign is the SignatureHeader value for a body sent at t: the Unix time and the hex
// HMAC-SHA256, keyed by the secret, of "<unix time>.<body>".
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Run delivers the queued notices until ctx ends, one at a time, retrying failures with
// backoff. When ctx ends, what waits is given up and recorded so, and Run returns.
func (n *Notifier) Run(ctx context.Context) {
	var pending []*delivery // waiting for a retry, soonest first
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n.recordOverflow(ctx)
		in := n.queue
		if len(pending) >= maxPending {
			in = nil
		}
		var due <-chan time.Time
		if len(pending) > 0 {
			timer.Reset(time.Until(pending[0].next))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			n.abandon(ctx, pending)
			return
		case d := <-in:
			pending = n.attempt(ctx, d, pending)
		case <-due:
			d := pending[0]
			pending = pending[1:]
			pending = n.attempt(ctx, d, pending)
		}
	}
}

// attempt makes one attempt of d, records it, and returns pending with d in its place
// when another attempt follows.
func (n *Notifier) attempt(ctx context.Context, d *delivery, pending []*delivery) []*delivery {
	now := time.Now()
	if d.attempts == 0 {
		d.first = now
	}
	d.attempts++
	status, err := n.post(ctx, d, now)
	rec := n.record(d, Delivered, status, err)
	if err == nil {
		n.logger.Debug("webhook delivered", "session_id", d.notice.SessionID, "agent_id", d.notice.AgentID, "hook", d.target.name,
			"delivery", d.id, "attempt", d.attempts)
		n.keep(ctx, rec)
		return pending
	}
	if ctx.Err() != nil {
		// Stopping: Run's abandon records it given up with the rest.
		return insert(pending, d)
	}
	wait := n.backoff(d.attempts)
	if d.attempts >= n.maxAttempts || now.Add(wait).Sub(d.first) > n.maxElapsed {
		rec.Outcome = GaveUp
		n.logger.Warn("webhook delivery given up", "session_id", d.notice.SessionID, "agent_id", d.notice.AgentID, "hook", d.target.name,
			"delivery", d.id, "attempts", d.attempts, "err", err)
		n.keep(ctx, rec)
		return pending
	}
	rec.Outcome = Failed
	n.keep(ctx, rec)
	d.next = now.Add(wait)
	return insert(pending, d)
}

// insert puts d among pending by when it is due.
func insert(pending []*delivery, d *delivery) []*delivery {
	i, _ := slices.BinarySearchFunc(pending, d.next, func(p *delivery, t time.Time) int { return p.next.Compare(t) })
	return slices.Insert(pending, i, d)
}

// backoff is the wait after the given number of failed attempts: FirstRetry doubling up
// to MaxRetryDelay, between half and all of it at random, so that receivers back from an
// outage do not get every retry at once.
func (n *Notifier) backoff(failed int) time.Duration {
	wait := n.firstRetry
	for i := 1; i < failed && wait < n.maxWait; i++ {
		wait *= 2
	}
	wait = min(wait, n.maxWait)
	return wait/2 + rand.N(wait/2+1)
}

// post makes one request; a status other than 2xx is an error.
func (n *Notifier) post(ctx context.Context, d *delivery, now time.Time) (int, error) {
	body, err := json.Marshal(d.notice)
	if err != nil {
		return 0, fmt.Errorf("encode the notice: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, n.attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.target.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agenticd-webhooks")
	req.Header.Set(DeliveryHeader, d.id)
	req.Header.Set(EventHeader, string(d.notice.Type))
	req.Header.Set(SignatureHeader, Sign(d.target.secret, now, body))
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, err
	}
	// Drained (a little) so that the connection is kept for the next delivery.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// record is the Record of d's last attempt.
func (n *Notifier) record(d *delivery, outcome Outcome, status int, err error) Record {
	r := Record{Time: time.Now(), DeliveryID: d.id, Hook: d.target.name, Host: d.target.host, Kind: d.notice.Type,
		SessionID: d.notice.SessionID, AgentID: d.notice.AgentID, Sequence: d.notice.Sequence, Outcome: outcome,
		Attempt: d.attempts, HTTPStatus: status}
	if err != nil {
		r.Err = redact(err, d.target.url)
	}
	return r
}

// redact keeps a hook's URL, whose path or query may be its secret (many services
// put the key there), out of an error that quotes it.
func redact(err error, rawURL string) string {
	return strings.ReplaceAll(err.Error(), rawURL, "<hook url>")
}

// keep records records; a failure is logged, and delivery goes on.
func (n *Notifier) keep(ctx context.Context, records ...Record) {
	if n.recorder == nil || len(records) == 0 {
		return
	}
	// Records of a stop are kept after ctx ended, within a bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := n.recorder.RecordDeliveries(ctx, records); err != nil {
		n.logger.Error("webhook deliveries could not be recorded in the audit log", "records", len(records), "err", err)
	}
}

// recordOverflow records the deliveries dropped since it last ran.
func (n *Notifier) recordOverflow(ctx context.Context) {
	dropped := n.overflowed.Swap(0)
	if dropped == 0 {
		return
	}
	n.logger.Warn("webhook deliveries were dropped: the queue was full", "dropped", dropped)
	n.keep(ctx, Record{Time: time.Now(), Outcome: Dropped, Dropped: dropped})
}

// abandon records as given up what waits when Run stops: the retries and the queue.
func (n *Notifier) abandon(ctx context.Context, pending []*delivery) {
	for {
		select {
		case d := <-n.queue:
			pending = append(pending, d)
			continue
		default:
		}
		break
	}
	n.recordOverflow(ctx)
	if len(pending) == 0 {
		return
	}
	records := make([]Record, len(pending))
	for i, d := range pending {
		records[i] = n.record(d, GaveUp, 0, nil)
		records[i].Err = "the server stopped"
	}
	n.logger.Warn("webhook deliveries given up: the server stopped", "deliveries", len(pending))
	n.keep(ctx, records...)
}
