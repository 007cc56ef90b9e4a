package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// median of the values (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile p (0..100) of already sorted values, nearest rank.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.5) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// latencies collects receive-minus-send times in nanoseconds.
type latencies []int64

func (l latencies) p50p99() (time.Duration, time.Duration) {
	s := slices.Clone(l)
	slices.Sort(s)
	return time.Duration(percentile(s, 50)), time.Duration(percentile(s, 99))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// chunkCheck follows the text of a stamped flood (see internal/testagent/pace.go:
// chunk i is "%08d|%019d|" padded to size bytes) as it arrives in deltas of any length.
// It checks order and completeness and records each chunk's latency from the agent's
// stamp to the moment its first byte arrived.
type chunkCheck struct {
	size    int
	want    int
	next    int    // index of the next chunk expected
	partial []byte // bytes of an unfinished chunk
	recvAt  int64  // when the unfinished chunk's first byte arrived
	err     error
	lat     latencies
}

const stampPrefix = len("00000000|0000000000000000000|")

func newChunkCheck(size, count int) *chunkCheck {
	return &chunkCheck{size: max(size, stampPrefix), want: count, lat: make(latencies, 0, count)}
}

// feed takes a piece of message text received at recv (Unix nanoseconds).
func (c *chunkCheck) feed(text string, recv int64) {
	if c.err != nil {
		return
	}
	// The common case: one delta is exactly one chunk.
	if len(c.partial) == 0 && len(text) == c.size {
		c.chunk(text, recv)
		return
	}
	for len(text) > 0 && c.err == nil {
		if len(c.partial) == 0 {
			c.recvAt = recv
			if len(text) >= c.size {
				c.chunk(text[:c.size], recv)
				text = text[c.size:]
				continue
			}
		}
		n := min(c.size-len(c.partial), len(text))
		c.partial = append(c.partial, text[:n]...)
		text = text[n:]
		if len(c.partial) == c.size {
			c.chunk(string(c.partial), c.recvAt)
			c.partial = c.partial[:0]
		}
	}
}

func (c *chunkCheck) chunk(s string, recv int64) {
	idx, err1 := strconv.Atoi(s[:8])
	sent, err2 := strconv.ParseInt(s[9:28], 10, 64)
	switch {
	case err1 != nil || err2 != nil || s[8] != '|' || s[28] != '|':
		c.err = fmt.Errorf("chunk %d is not a stamped chunk: %.40q", c.next, s)
	case idx != c.next:
		c.err = fmt.Errorf("chunk %d arrived where chunk %d was expected (lost or reordered)", idx, c.next)
	default:
		c.lat = append(c.lat, recv-sent)
		c.next++
	}
}

// intact reports whether every chunk arrived, once, in order; nil when so.
func (c *chunkCheck) intact() error {
	if c.err != nil {
		return c.err
	}
	if c.next != c.want || len(c.partial) != 0 {
		return fmt.Errorf("%d of %d chunks arrived", c.next, c.want)
	}
	return nil
}

// medianCI is the median of xs and a distribution-free confidence interval for it at
// level conf (0.95 for 95 %): the order statistics x(k) and x(n+1-k), k the largest rank
// with P(Binomial(n, ½) < k) ≤ (1-conf)/2. It assumes nothing about the distribution,
// which suits latencies with long tails. With too few values for the level (fewer than 6
// at 95 %) the interval is the whole range and ok is false.
func medianCI(xs []float64, conf float64) (med, lo, hi float64, ok bool) {
	n := len(xs)
	if n == 0 {
		return 0, 0, 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med = median(s)
	tail := (1 - conf) / 2
	k := 0
	cum := 0.0
	for j := 0; j < n; j++ {
		cum += binomialHalf(n, j)
		if cum > tail {
			break
		}
		k = j + 1
	}
	if k == 0 {
		return med, s[0], s[n-1], false
	}
	return med, s[k-1], s[n-k], true
}

// binomialHalf is P(X = j) for X ~ Binomial(n, ½), computed in logs so that large n
// does not overflow.
func binomialHalf(n, j int) float64 {
	lgN, _ := math.Lgamma(float64(n + 1))
	lgJ, _ := math.Lgamma(float64(j + 1))
	lgNJ, _ := math.Lgamma(float64(n - j + 1))
	return math.Exp(lgN - lgJ - lgNJ - float64(n)*math.Ln2)
}
