//go:build !race

package hostlog_test

const raceEnabled = false
