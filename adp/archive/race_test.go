//go:build race

package archive

// raceEnabled scales down the heaviest tests under the race detector, which
// slows signature verification tenfold; the kernel starts no goroutines, so
// those tests gain nothing from it.
const raceEnabled = true
