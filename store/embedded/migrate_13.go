package embedded

import bolt "go.etcd.io/bbolt"

// fireTraceRows brings layout 13 to 14, which adds a fire's trace context
// to the fire codec (fireTraceParent) under a flag that rows of layout 13
// never set: those rows read the same, so nothing is rewritten. The new
// layout number keeps a schedulerd of layout 13 from opening rows it
// would misread.
func fireTraceRows(*bolt.DB, *tokenKey) error { return nil }
