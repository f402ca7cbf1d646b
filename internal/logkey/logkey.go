// Package logkey names the log fields that carry ids, so that the same id
// has the same key in every component's log lines.
package logkey

const (
	Tenant    = "tenantId"
	Schedule  = "scheduleId"
	Policy    = "policyId"
	Fire      = "fireId"
	Event     = "eventId"
	Key       = "keyId"
	Shard     = "shard"
	Partition = "partition"
	Lease     = "lease"
	Fence     = "fence"
	Instance  = "instanceId"
	Component = "component"
	Request   = "requestId"
)
