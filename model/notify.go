package model

import (
	"strings"
	"time"
)

// NotifyKind is a fire event a notification is sent for.
type NotifyKind string

const (
	// NotifyFinished: every event of the fire finished (released, dead or
	// cancelled).
	NotifyFinished NotifyKind = "fire.finished"
	// NotifyHasDead: the fire finished with at least one dead event.
	NotifyHasDead NotifyKind = "fire.has_dead"
	// NotifyDeadlineMissed: the fire was not finished by its deadline.
	NotifyDeadlineMissed NotifyKind = "fire.deadline_missed"
	// NotifySkipped: the fire was recorded without events (overlap, a
	// skip, a calendar).
	NotifySkipped NotifyKind = "fire.skipped"
	// NotifyEventDead: the first event of the fire went dead (one message
	// per fire, not per dead event).
	NotifyEventDead NotifyKind = "event.dead"
)

// NotifyKinds are the kinds in the order the API lists them.
var NotifyKinds = []NotifyKind{NotifyFinished, NotifyHasDead, NotifyDeadlineMissed, NotifySkipped, NotifyEventDead}

// Valid reports whether k is a known kind.
func (k NotifyKind) Valid() bool {
	for _, v := range NotifyKinds {
		if v == k {
			return true
		}
	}
	return false
}

// Notify is one receiver of notifications: an HTTP URL or an SQS queue,
// and the kinds it is sent.
type Notify struct {
	URL      string       `json:"url,omitempty"`
	QueueURL string       `json:"queueUrl,omitempty"`
	On       []NotifyKind `json:"on"`
}

// Target is where the notification is delivered.
func (n Notify) Target() Target {
	if n.QueueURL != "" {
		return Target{Type: TargetSQS, QueueURL: n.QueueURL}
	}
	return Target{Type: TargetHTTP, URL: n.URL}
}

// Wants reports whether n is sent kind k.
func (n Notify) Wants(k NotifyKind) bool {
	for _, v := range n.On {
		if v == k {
			return true
		}
	}
	return false
}

// MaxNotify bounds the receivers of a schedule or tenant.
const MaxNotify = 4

// AfterWhen says which upstream fires a dependent schedule fires after.
type AfterWhen string

const (
	// AfterFinished: every upstream fire that finished, whatever its
	// events' outcome.
	AfterFinished AfterWhen = "finished"
	// AfterSucceeded: only upstream fires whose every event was released
	// (none dead, none cancelled).
	AfterSucceeded AfterWhen = "succeeded"
)

// After names the schedule a dependent schedule fires after.
type After struct {
	ScheduleID string    `json:"scheduleId"`
	When       AfterWhen `json:"when"`
}

// afterSep joins a dependent schedule's id to its upstream fire's id.
const afterSep = ".after."

// AfterFireID is the id of the fire of the dependent schedule scheduleID
// for the upstream fire upstreamFireID: one fire per upstream fire,
// whatever the dependent's version, so that every instance and every
// retry after a crash writes the same fire.
func AfterFireID(scheduleID, upstreamFireID string) string {
	return scheduleID + afterSep + upstreamFireID
}

// AfterDepth is how many dependency links the fire id went through: a
// chain a cycle made (which saves refuse) cannot grow without end.
func AfterDepth(fireID string) int { return strings.Count(fireID, afterSep) }

// MaxAfterDepth bounds chains of dependent schedules.
const MaxAfterDepth = 16

// FireCounts are a fire's events by outcome, as notifications report them.
type FireCounts struct {
	Count     int `json:"count"`
	Released  int `json:"released"`
	Dead      int `json:"dead"`
	Cancelled int `json:"cancelled"`
	// Expired counts the events in any other finished status (events a
	// missed deadline expired).
	Expired int `json:"expired,omitempty"`
	Waiting int `json:"waiting"`
}

// Finished reports whether no more work will happen for the fire.
func (c FireCounts) Finished() bool {
	return c.Waiting == 0 && c.Released+c.Dead+c.Cancelled+c.Expired >= c.Count
}

// Succeeded reports whether every event of the fire was released.
func (c FireCounts) Succeeded() bool {
	return c.Finished() && c.Dead == 0 && c.Cancelled == 0 && c.Expired == 0
}

// Notification is the body of a notification message.
type Notification struct {
	ID         string       `json:"id"`
	Kind       NotifyKind   `json:"kind"`
	TenantID   string       `json:"tenantId"`
	ScheduleID string       `json:"scheduleId"`
	FireID     string       `json:"fireId"`
	FireTime   time.Time    `json:"fireTime"`
	Decision   FireDecision `json:"decision"`
	Note       string       `json:"note,omitempty"`
	Counts     FireCounts   `json:"counts"`
	At         time.Time    `json:"at"`
}

// NotificationFireID is the fire id notification events of kind k about
// fire fireID carry: apart from the fire's own, so that they are not
// counted among its events.
func NotificationFireID(fireID string, k NotifyKind) string { return fireID + "~" + string(k) }
