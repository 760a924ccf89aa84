//go:build race

package mirror_test

// replRecords is how many records TestMirrorReplication writes. The race
// detector slows every signature check several times over (and the test
// runs three nodes on two cores), so it writes fewer there.
const replRecords = 5000

// memRecords is how many records TestMirrorMemoryPerRecord mirrors.
const memRecords = 5000
