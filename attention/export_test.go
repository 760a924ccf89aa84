package attention

// SetDrop makes the listener drop the events drop selects, as if the
// process died between their commit and their derivation.
func SetDrop(c *Config, drop func(roomID string, seq int64) bool) { c.drop = drop }
