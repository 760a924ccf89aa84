package index

// SetWriteHook makes every Flush call fn with the batch size before it
// writes, outside the index lock (set before use).
func SetWriteHook(x *Index, fn func(keys int)) { x.writeHook = fn }
