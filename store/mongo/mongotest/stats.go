package mongotest

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// cmdStats adds up the proxy's commands by shape (command, collection and
// the fields its filter names), so that a slow FerretDB can be asked what it
// spends its time on. Latency runs from forwarding a command to its reply;
// wait is the part spent on the proxy's write locks before forwarding.
type cmdStats struct {
	mu sync.Mutex
	by map[string]*cmdStat
}

type cmdStat struct {
	n             int
	total, max    time.Duration
	wait, maxWait time.Duration
}

func (s *cmdStats) add(shape string, took, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]*cmdStat{}
	}
	st := s.by[shape]
	if st == nil {
		st = &cmdStat{}
		s.by[shape] = st
	}
	st.n++
	st.total += took
	st.max = max(st.max, took)
	st.wait += wait
	st.maxWait = max(st.maxWait, wait)
}

// report writes the shapes of the last interval by total time, the
// largest first (at most top of them), and starts a new interval.
func (s *cmdStats) report(w io.Writer, interval time.Duration, top int) {
	s.mu.Lock()
	by := s.by
	s.by = nil
	s.mu.Unlock()
	type row struct {
		shape string
		*cmdStat
	}
	rows := make([]row, 0, len(by))
	var n int
	var total time.Duration
	for k, v := range by {
		rows = append(rows, row{k, v})
		n += v.n
		total += v.total
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.total, a.total) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "proxy stats over %s: %d commands, %.1f s in flight\n", interval, n, total.Seconds())
	for i, r := range rows {
		if i == top {
			break
		}
		fmt.Fprintf(&sb, "  %6d  total %7.1fs  mean %6.1fms  max %6.0fms  lock wait %6.1fs (max %5.0fms)  %s\n",
			r.n, r.total.Seconds(), ms(r.total)/float64(r.n), ms(r.max), r.wait.Seconds(), ms(r.maxWait), r.shape)
	}
	_, _ = io.WriteString(w, sb.String())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// shape names a command for cmdStats: "find events {policyId,status}".
func shape(msg []byte) string {
	if len(msg) < 21 || int32(binary.LittleEndian.Uint32(msg[12:16])) != opMsg {
		return "legacy"
	}
	body, seqs, err := sections(msg[20:])
	if err != nil {
		return "unparsed"
	}
	elems, err := body.Elements()
	if err != nil || len(elems) == 0 {
		return "unparsed"
	}
	name := elems[0].Key()
	coll, _ := elems[0].Value().StringValueOK()
	if name == "getMore" {
		coll, _ = body.Lookup("collection").StringValueOK()
	}
	filter := func(d bson.Raw) string {
		els, _ := d.Elements()
		keys := make([]string, 0, len(els))
		for _, e := range els {
			k := e.Key()
			if sub, ok := e.Value().DocumentOK(); ok {
				if ops, _ := sub.Elements(); len(ops) > 0 && strings.HasPrefix(ops[0].Key(), "$") {
					k += ":" + ops[0].Key()
				}
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return "{" + strings.Join(keys, ",") + "}"
	}
	var f string
	switch name {
	case "find", "delete", "update", "count", "findAndModify", "aggregate":
		var q bson.Raw
		switch name {
		case "find":
			q, _ = body.Lookup("filter").DocumentOK()
		case "count", "findAndModify":
			q, _ = body.Lookup("query").DocumentOK()
		case "aggregate":
			if arr, ok := body.Lookup("pipeline").ArrayOK(); ok {
				if vals, _ := arr.Values(); len(vals) > 0 {
					if st, ok := vals[0].DocumentOK(); ok {
						q, _ = st.Lookup("$match").DocumentOK()
					}
				}
			}
		default:
			docs := statementDocs(name, body, seqs)
			if len(docs) > 0 {
				q, _ = docs[0].Lookup(statements[name][1]).DocumentOK()
			}
			f = fmt.Sprintf(" x%s", bucketOf(len(docs)))
		}
		if q != nil {
			f = " " + filter(q) + f
		}
	case "insert":
		f = fmt.Sprintf(" x%s", bucketOf(len(seqs["documents"])))
	}
	return name + " " + coll + f
}

// bucketOf groups statement counts so that shapes stay few.
func bucketOf(n int) string {
	switch {
	case n <= 1:
		return "1"
	case n <= 10:
		return "2-10"
	case n <= 100:
		return "11-100"
	default:
		return ">100"
	}
}
