//go:build !race

package mongo_test

// raceDetector is true in builds with the race detector.
const raceDetector = false
