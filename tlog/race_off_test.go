//go:build !race

package tlog_test

const raceEnabled = false
