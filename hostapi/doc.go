// Package hostapi is the HTTP face of a node: the ADP §16 endpoints in the
// DECISIONS shapes, SSE (§17), discovery, health. Handlers are thin: decode,
// call the node, encode. ADP error codes map to HTTP statuses in exactly one
// place (httpwire.StatusOf).
package hostapi
