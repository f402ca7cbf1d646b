// Package chaos holds the fault tests of schedulerd: they build the
// schedulerd and ferretdb commands, run them as real processes, break them
// (SIGKILL, SIGSTOP, a stopped store, a failing consumer) while schedules
// fire, and check the service's promises from the outside, through the REST
// API and a recording HTTP consumer (package internal/testkit/chaoskit):
//
//   - TestChaosMultiInstanceKill: three instances on one FerretDB process,
//     instances killed with SIGKILL and restarted at random moments; every
//     expected event delivered, the throttle bound held at every delivery,
//     nothing stuck, at most 0.1% of the events delivered twice.
//   - TestChaosEmbeddedKillRestart: one instance on the embedded store,
//     killed and restarted 10 times during a run; nothing lost.
//   - TestChaosKillDuplicates (CHAOS_LONG=1 only): one instance on the
//     embedded store delivering 20,000 events of one policy (maxInFlight
//     50), killed 5 times; at most 0.1% of the events delivered twice.
//   - TestChaosLargeEmission: one instance on the embedded store, killed
//     while it writes a large fire's events in the background and
//     restarted; the emission resumes and the fire ends with exactly its
//     n events, each delivered.
//
// In every test each duplicate delivery must be explained: the instance
// that sent the earlier copy was killed (or the store stopped) while that
// copy was in flight, accepted by the consumer and not yet acknowledged by
// its release (chaoskit.UnexplainedDuplicates); in the consumer-failure
// test, where nothing is killed, also a copy whose attempt the scheduler had
// timed out (its release refused with 409).
//   - TestChaosStoreOutage: the store process stopped for 10 seconds
//     mid-run; readiness turns false and back, the instance does not exit,
//     nothing lost.
//   - TestChaosConsumerFailures: a consumer answering 30% errors and
//     timeouts; retries, dead letters after maxAttempts, redrive delivers
//     them.
//
// The tests are skipped with -short. The default sizes fit CI (a few
// minutes on two cores); CHAOS_LONG=1 runs longer, larger versions
// (scripts/chaos-long.sh). CHAOS_KEEP_LOGS=1 keeps process logs of passing
// tests in the test's log output.
package chaos
