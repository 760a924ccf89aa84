//go:build race

package node

// raceEnabled is set when tests run under the race detector, which makes
// building thousands of signed rooms slow: size-bound tests use fewer.
const raceEnabled = true
