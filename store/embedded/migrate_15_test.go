package embedded

import "testing"

// A directory of layout 15 opens as the current layout with the due
// entries of its waiting events keyed by turn, also when an earlier run of
// the migration stopped in either pass.
func TestMigrateDueTurns(t *testing.T) {
	testDueRewrite(t, dueTurns, 15, func(t *testing.T) string {
		return waitingStore(t, 15, func(k []byte, n int, rk []byte) []byte {
			return append(append([]byte(nil), k[:5+n+timeLen]...), rk...)
		})
	})
}
