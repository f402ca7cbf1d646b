//go:build !race

package storetest

// raceDetector is true in builds with the race detector.
const raceDetector = false
