package attention

// SetOnPass makes the owner call fn after each pass.
func SetOnPass(c *Config, fn func()) { c.onPass = fn }

// SetCommits makes every commit hold at most ops operations and about
// bytes, and calls before ahead of queueing commit i of n of one batch.
func SetCommits(c *Config, ops, bytes int, before func(i, n int)) {
	c.chunkOps, c.chunkBytes, c.beforeCommit = ops, bytes, before
}
