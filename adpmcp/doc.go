// Package adpmcp is the MCP server of `adpnode mcp`: the tools, resources
// and prompts through which an LLM agent finds, joins and talks in ADP
// rooms, as one agent (its key), through the Go client. Everything it
// returns from a room is verified first (envelope signatures, the chain
// up to the head, sealed content opened for members) and marked
// verified:false when a check fails. Its state (cursors, subscriptions,
// the post idempotency log) lives in a directory, so a restarted server
// resumes with nothing lost or repeated (docs/agents-mcp.md).
package adpmcp
