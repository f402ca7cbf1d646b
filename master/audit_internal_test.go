package master

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

func TestAuditDiff(t *testing.T) {
	before := &model.Schedule{ID: "sch_1", TenantID: "t", Name: "a", Window: 5 * time.Minute, Version: 1, Payload: json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)}
	after := *before
	after.Name, after.Window, after.Version, after.Payload = "b", 15*time.Minute, 2, json.RawMessage(`{"k":1}`)
	got := string(auditDiff(before, &after))
	want := `{"name":{"after":"b","before":"a"},"payload":{"after":{"k":1},"before":{"bytes":2002}},"window":{"after":"15m0s","before":"5m0s"}}`
	if got != want {
		t.Fatalf("diff\n%s\nwant\n%s", got, want)
	}
	if d := auditDiff(before, before); d != nil {
		t.Fatalf("diff of the same object: %s", d)
	}
	k := &model.APIKey{ID: "key_1", Hash: "secret-hash", Prefix: "sk_ab"}
	if d := string(auditDiff(nil, k)); strings.Contains(d, "secret-hash") || !strings.Contains(d, `"prefix":{"after":"sk_ab"}`) {
		t.Fatalf("diff of a key: %s", d)
	}
}

// FuzzAuditDiff: whatever two JSON objects are, the diff is a JSON object
// of {before, after} members, or nil when nothing differs.
func FuzzAuditDiff(f *testing.F) {
	f.Add(`{"name":"a","window":300000000000}`, `{"name":"b"}`)
	f.Add(`{}`, `{"hash":"x"}`)
	f.Add(`[1]`, `null`)
	f.Fuzz(func(t *testing.T, a, b string) {
		var va, vb any
		if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
			t.Skip()
		}
		d := auditDiff(va, vb)
		if d == nil {
			return
		}
		var out map[string]map[string]json.RawMessage
		if err := json.Unmarshal(d, &out); err != nil {
			t.Fatalf("diff %s is not an object of changes: %v", d, err)
		}
		for k, ch := range out {
			if auditSkipped[k] || len(ch) == 0 {
				t.Fatalf("member %q in diff %s", k, d)
			}
		}
	})
}
