package handler

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/model"
)

// hostLimits bounds the events in flight to each consumer host. A host's
// limit starts at max; a delivery to it that timed out, was refused or got
// a 5xx halves it (at least 1), and every success adds 1 back up to max
// (AIMD), so that a broken consumer holds few delivery slots and regains
// them as it recovers. A host with nothing in flight at full limit is
// forgotten.
//
// The slots of an http_batch host are deliveries, not events: its events
// go to it in few requests, so a delivery of up to batch events takes one
// slot, and a successful delivery gives one back.
type hostLimits struct {
	max   int
	batch int // the most events of one delivery to an http_batch host
	mu    sync.Mutex
	hosts map[string]*hostLimit
}

type hostLimit struct {
	limit, inFlight int
}

func newHostLimits(limit, batch int) *hostLimits {
	return &hostLimits{max: limit, batch: max(batch, 1), hosts: map[string]*hostLimit{}}
}

// batchHostPrefix starts the host keys of http_batch targets (hostKey).
const batchHostPrefix = string(model.TargetHTTPBatch) + " "

// perSlot returns how many events one slot of host holds.
func (l *hostLimits) perSlot(host string) int {
	if strings.HasPrefix(host, batchHostPrefix) {
		return l.batch
	}
	return 1
}

// slots returns the slots a delivery of n events to host takes.
func (l *hostLimits) slots(host string, n int) int {
	if l.perSlot(host) > 1 {
		return 1
	}
	return n
}

// free returns how many more events may go to host now.
func (l *hostLimits) free(host string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.hosts[host]; h != nil {
		return (h.limit - h.inFlight) * l.perSlot(host)
	}
	return l.max * l.perSlot(host)
}

// acquire counts a delivery of n events in flight to host.
func (l *hostLimits) acquire(host string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.hosts[host]
	if h == nil {
		h = &hostLimit{limit: l.max}
		l.hosts[host] = h
	}
	h.inFlight += l.slots(host, n)
}

// done ends n events in flight to host, adjusting its limit by results
// (the results of the events that were sent; fewer than n if some were
// not).
func (l *hostLimits) done(host string, n int, results []delivery.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.hosts[host]
	if h == nil {
		return
	}
	h.inFlight -= l.slots(host, n)
	ok, congested := 0, false
	for _, r := range results {
		switch {
		case r.Err == nil:
			ok++
		case congestion(r):
			congested = true
		}
	}
	switch {
	case congested:
		// Once per batch: its requests ran together, one signal.
		h.limit = max(1, h.limit/2)
	default:
		h.limit = min(l.max, h.limit+min(ok, l.slots(host, ok)))
	}
	if h.inFlight <= 0 && h.limit == l.max {
		delete(l.hosts, host)
	}
}

// limit returns host's current limit (for tests).
func (l *hostLimits) limit(host string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.hosts[host]; h != nil {
		return h.limit
	}
	return l.max
}

// congestion reports whether r says the consumer is overloaded or down: a
// 5xx answer, a timeout or a refused connection.
func congestion(r delivery.Result) bool {
	if r.Err == nil || r.Permanent {
		return false
	}
	if r.StatusCode >= 500 {
		return true
	}
	var ne net.Error
	return errors.Is(r.Err, context.DeadlineExceeded) || errors.Is(r.Err, syscall.ECONNREFUSED) ||
		errors.Is(r.Err, syscall.ECONNRESET) || (errors.As(r.Err, &ne) && ne.Timeout())
}
