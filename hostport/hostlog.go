package hostport

// LogResource is one file of the host log's tlog-tiles layout, as the
// log serves it to the HTTP API.
type LogResource struct {
	Body []byte
	// Immutable: a full tile or bundle (cache for ever); otherwise a
	// partial one or the checkpoint.
	Immutable  bool
	Checkpoint bool
}
