package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/schedulerd/schedulerd/client"
)

// readLimits reads a policy's limit schedule, a JSON array of rules, from
// file (- is stdin).
func readLimits(e *env, file string) ([]client.LimitRule, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(e.stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	var rules []client.LimitRule
	if err := json.Unmarshal(b, &rules); err != nil {
		return nil, fmt.Errorf("--limits %s: not a JSON array of limit rules: %v: %w", file, err, errUsage)
	}
	return rules, nil
}

// policyHoldFlags are the flags of "policies hold".
func policyHoldFlags(fs *flag.FlagSet) func(*env, []string) error {
	maxIn := fs.Int("max-in-flight", 0, "most tokens out while the hold lasts; 0 stops the inflow")
	until := fs.String("until", "", "when the hold ends, RFC 3339")
	forD := fs.Duration("for", 0, "how long the hold lasts, e.g. 30m (instead of --until)")
	return func(e *env, a []string) error {
		end, err := optTime("until", *until)
		if err != nil {
			return err
		}
		switch {
		case end == nil && *forD <= 0:
			return fmt.Errorf("give --until or --for: %w", errUsage)
		case end != nil && *forD > 0:
			return fmt.Errorf("--until and --for: give one: %w", errUsage)
		case end == nil:
			t := time.Now().Add(*forD).UTC().Truncate(time.Second)
			end = &t
		}
		return fetch(e, policyStatusTable)(e.api.SetPolicyHold(e.ctx, a[0], client.HoldRequest{Until: *end, MaxInFlight: *maxIn}))
	}
}

func policyStatusTable(w *tabwriter.Writer, s *client.PolicyStatus) {
	fmt.Fprintf(w, "policy\t%s\nin use\t%d\nwaiting\t%d\nmax in flight\t%d\neffective limit\t%d (%s)\n",
		s.PolicyId, s.TokensInUse, s.Waiting, s.MaxInFlight, s.EffectiveLimit, s.LimitSource)
	if s.LimitUntil != nil {
		fmt.Fprintf(w, "limit until\t%s\n", ts(*s.LimitUntil))
	}
	if s.Hold != nil {
		fmt.Fprintf(w, "hold\t%d until %s\n", s.Hold.MaxInFlight, ts(s.Hold.Until))
	}
	if s.DrainEta != nil {
		fmt.Fprintf(w, "drained by\t%s\n", ts(*s.DrainEta))
	}
}

func keyCreatedTable(w *tabwriter.Writer, v *client.APIKeyCreated) {
	fmt.Fprintln(w, "ID\tPOLICY\tKEY")
	fmt.Fprintf(w, "%s\t%s\t%s\n", v.Id, sp(v.PolicyId), v.Key)
}

func keyListTable(w *tabwriter.Writer, v *client.APIKeyList) {
	fmt.Fprintln(w, "ID\tPREFIX\tCREATED\tREVOKED")
	for _, k := range v.Items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.Id, k.Prefix, ts(k.CreatedAt), tsp(k.RevokedAt))
	}
}
