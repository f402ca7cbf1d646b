package schedule

import (
	"slices"
	"strconv"

	"github.com/schedulerd/schedulerd/model"
)

// cloneNotify is a copy of ns that shares nothing with it.
func cloneNotify(ns []model.Notify) []model.Notify {
	if ns == nil {
		return nil
	}
	out := make([]model.Notify, len(ns))
	for i, n := range ns {
		out[i] = n
		out[i].On = slices.Clone(n.On)
	}
	return out
}

// checkNotify checks the receivers of notifications: at most
// model.MaxNotify, each with exactly one address (checked as a target's,
// SSRF guard included) and known kinds, each once.
func checkNotify(fe *Errors, ns []model.Notify, checkHost, checkQueueURL func(string) error) []model.Notify {
	if len(ns) == 0 {
		return nil
	}
	if len(ns) > model.MaxNotify {
		fe.Add("notify", "has "+strconv.Itoa(len(ns))+" receivers; at most "+strconv.Itoa(model.MaxNotify))
		return nil
	}
	out := cloneNotify(ns)
	for i, n := range ns {
		field := "notify[" + strconv.Itoa(i) + "]"
		switch {
		case n.URL != "" && n.QueueURL != "":
			fe.Add(field+".url", "give url or queueUrl, not both")
		case n.URL != "":
			u := n.URL
			checkTargetAt(fe, field, Target{Type: model.TargetHTTP, URL: &u}, checkHost, checkQueueURL)
		case n.QueueURL != "":
			q := n.QueueURL
			checkTargetAt(fe, field, Target{Type: model.TargetSQS, QueueURL: &q}, checkHost, checkQueueURL)
		default:
			fe.Add(field+".url", "one of url and queueUrl is required")
		}
		if len(n.On) == 0 {
			fe.Add(field+".on", "name at least one of "+kindList())
		}
		for j, k := range n.On {
			switch {
			case !k.Valid():
				fe.Add(field+".on["+strconv.Itoa(j)+"]", "must be one of "+kindList())
			case slices.Contains(n.On[:j], k):
				fe.Add(field+".on["+strconv.Itoa(j)+"]", string(k)+" is named twice")
			}
		}
	}
	return out
}

func kindList() string {
	s := ""
	for i, k := range model.NotifyKinds {
		if i > 0 {
			s += ", "
		}
		s += string(k)
	}
	return s
}

// CheckNotify checks receivers of notifications given elsewhere than in a
// schedule (a tenant's) as Compile checks a schedule's, with lim's
// address checks; the errors name notify[i]….
func CheckNotify(ns []model.Notify, lim Limits) ([]model.Notify, error) {
	var fe Errors
	out := checkNotify(&fe, ns, lim.CheckTargetHost, lim.CheckQueueURL)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkAfter checks a dependency's own members; whether it names another
// schedule of the tenant without a cycle is the caller's (it reads the
// store).
func checkAfter(fe *Errors, a model.After) *model.After {
	out := a
	if a.ScheduleID == "" {
		fe.Add("after.scheduleId", "required")
	}
	switch a.When {
	case "":
		out.When = model.AfterFinished
	case model.AfterFinished, model.AfterSucceeded:
	default:
		fe.Add("after.when", "must be finished or succeeded")
	}
	return &out
}
