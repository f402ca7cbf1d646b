package embedded

import "testing"

// A directory of layout 16 opens as the current layout with the due
// entries of the waiting events of a policy's lanes keyed by schedule and
// their schedules' heads, also when an earlier run of the migration
// stopped in either pass.
func TestMigrateDueHeads(t *testing.T) {
	testDueRewrite(t, dueHeads, 16, func(t *testing.T) string {
		return waitingStore(t, 16, func(k []byte, _ int, _ []byte) []byte { return k })
	})
}
