package hostapi

import (
	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/httpwire"
)

// StatusOf returns the HTTP status for an ADP error code. The table itself
// lives in httpwire, shared with federation relays.
func StatusOf(c adp.Code) int { return httpwire.StatusOf(c) }

// ErrorCodes lists every code the host can answer with its status.
func ErrorCodes() map[adp.Code]int { return httpwire.Codes() }
