//go:build !race

package mirror_test

// replRecords is how many records TestMirrorReplication writes.
const replRecords = 6000

// memRecords is how many records TestMirrorMemoryPerRecord mirrors.
const memRecords = 20_000
