package schedule

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
)

// Spec is a schedule's definition as a client states it. Exactly one of
// Cron, Fields, Crons, Interval, RunAt and After is set. String fields hold the client's text
// (Window is a duration such as "30m") so that Compile can say what is wrong
// with it.
type Spec struct {
	Name        string
	Cron        *string
	Fields      *cron.Fields // the field form of Cron; empty fields mean "*"
	RunAt       *time.Time
	Timezone    string // "" means UTC
	EventCount  int
	PolicyID    string
	Window      string // "" means no window
	Spread      bool
	Priority    int
	Overlap     model.OverlapPolicy
	Target      Target
	Payload     json.RawMessage
	MaxAttempts int
	StartAt     *time.Time
	EndAt       *time.Time
	Misfire     model.MisfirePolicy
	// Jitter is a duration such as "15m"; "" means none.
	Jitter string
	// Labels are the client's key/value pairs (label.Check's rules).
	Labels map[string]string
	// ExcludeCalendars are calendar ids (the caller checks that they are
	// the tenant's); OnExcluded "" is unset (skip).
	ExcludeCalendars []string
	OnExcluded       model.OnExcludedPolicy
	// Interval is a duration such as "90m"; nil means none.
	Interval *string
	// Crons are several cron expressions (their union); nil means none.
	Crons []string
	// Notify are the receivers of notifications about the fires.
	Notify []model.Notify
	// After makes the schedule fire after another instead of on a clock
	// (the caller checks that it names another schedule of the tenant and
	// makes no cycle).
	After *model.After
	// Deadline and MaxEventAge are durations such as "45m"; "" means none.
	Deadline    string
	MaxEventAge string
	// OnDeadline "" is unset (record).
	OnDeadline model.DeadlinePolicy
}

// MaxExcludeCalendars is the most calendars one schedule may name.
const MaxExcludeCalendars = 8

// Target is where a schedule's events go. URL and QueueURL are pointers
// because sending the other target type's field, even empty, is an error.
type Target struct {
	Type     model.TargetType
	URL      *string
	QueueURL *string
}

// Limits bound a Spec. The caller's configuration supplies them; Compile
// does not default them (a zero limit rejects every value above zero).
type Limits struct {
	MaxNameLen      int           // characters
	MaxEventCount   int           // eventCount is 1..MaxEventCount
	MaxPayloadBytes int           // bytes of the JSON payload
	MaxChildren     int           // children of one schedule; <= 0: cron.MaxChildren
	MaxWindow       time.Duration // longest batch window
	MinPriority     int
	MaxPriority     int
	MaxAttempts     int // maxAttempts is 1..MaxAttempts
	// CheckTargetHost, if set, refuses the host of an http target's URL
	// (without brackets, as url.URL.Hostname returns it); its error's text
	// is the reason given for target.url. The caller's SSRF rule goes here,
	// so that an address delivery would refuse is refused on save.
	CheckTargetHost func(host string) error
	// CheckQueueURL, if set, refuses an sqs target's queue URL; its error's
	// text is the reason given for target.queueUrl.
	CheckQueueURL func(queueURL string) error
	// MaxEventsPerFire is the tenant's quota of events per fire, on top of
	// MaxEventCount; 0: none.
	MaxEventsPerFire int
	// CatchUpLimit is how old a missed fire may be and still fire (the
	// emitter's). A one-off whose runAt is older than now-CatchUpLimit
	// would never fire: it is refused unless its misfire policy is
	// fire_all, which fires it at once. 0: runAt is not checked.
	CatchUpLimit time.Duration
}

// SpecFromSchedule is the Spec that compiles to m's definition; an update
// applies its changes to it and compiles again.
func SpecFromSchedule(m *model.Schedule) Spec {
	sp := Spec{
		Name:        m.Name,
		RunAt:       m.RunAt,
		Timezone:    m.Timezone,
		EventCount:  m.EventCount,
		PolicyID:    m.PolicyID,
		Spread:      m.Spread,
		Priority:    m.Priority,
		Overlap:     m.Overlap,
		Target:      TargetOf(m.Target),
		Payload:     m.Payload,
		MaxAttempts: m.MaxAttempts,
		StartAt:     m.StartAt,
		EndAt:       m.EndAt,
		Misfire:     m.Misfire,
		Labels:      m.Labels,
		// The spec's own copy: a patch must not change m's.
		ExcludeCalendars: slices.Clone(m.ExcludeCalendars),
		OnExcluded:       m.OnExcluded,
		OnDeadline:       m.OnDeadline,
	}
	if m.Deadline > 0 {
		sp.Deadline = m.Deadline.String()
	}
	if m.MaxEventAge > 0 {
		sp.MaxEventAge = m.MaxEventAge.String()
	}
	if m.Cron != "" {
		c := m.Cron
		sp.Cron = &c
	}
	if m.Window > 0 {
		sp.Window = m.Window.String()
	}
	if m.Jitter > 0 {
		sp.Jitter = m.Jitter.String()
	}
	if m.Interval > 0 {
		iv := m.Interval.String()
		sp.Interval = &iv
	}
	if len(m.Crons) > 0 {
		sp.Crons = slices.Clone(m.Crons)
	}
	sp.Notify = cloneNotify(m.Notify)
	if m.After != nil {
		a := *m.After
		sp.After = &a
	}
	return sp
}

// TargetOf is the Target that compiles to t; empty fields stay unset.
func TargetOf(t model.Target) Target {
	out := Target{Type: t.Type}
	if t.URL != "" {
		u := t.URL
		out.URL = &u
	}
	if t.QueueURL != "" {
		q := t.QueueURL
		out.QueueURL = &q
	}
	return out
}
