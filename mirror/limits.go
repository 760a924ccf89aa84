package mirror

// Limits returns the caps in force: rooms mirrored and bytes of records
// stored (Config.MaxRooms, Config.MaxBytes after defaults).
func (m *Mirror) Limits() (rooms int, bytes int64) { return m.cfg.MaxRooms, m.cfg.MaxBytes }
