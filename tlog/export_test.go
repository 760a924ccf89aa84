package tlog

// SetChunkForTest sets the leaves per journal transaction and tessera
// round, for logs opened after it; the returned func restores it.
func SetChunkForTest(n int) func() {
	old := chunk
	chunk = n
	return func() { chunk = old }
}
