//go:build !race

package mirror_test

// replRecords is how many records TestMirrorReplication writes.
const replRecords = 6000
