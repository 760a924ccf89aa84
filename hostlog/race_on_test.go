//go:build race

package hostlog_test

// raceEnabled is set under the race detector, which makes tessera's
// integration of 70,000 leaves take minutes on the project's machine: the
// tile-crossing test then uses fewer leaves (it runs in full without -race).
const raceEnabled = true
