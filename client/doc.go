// Package client is a Go client for agents using an ADP host: key files,
// clock-derived nonces with Max-Seen-Nonce resync, event building and
// signing, submits with a retry loop on room_head_mismatch, reads with
// pagination, SSE following with the §17.3 bootstrap and client-side chain
// verification, request JWTs and the join-request flow.
//
// # From another module
//
// Add the module and import the package:
//
//	go get github.com/adpnode/adpnode@latest
//
//	import "github.com/adpnode/adpnode/client"
//
// Give the client the node's origin and an agent key (a file made by
// `adpnode keygen --out agent.key`, or GenerateKey and Key.Save); keep key
// files out of source trees, mode 0600:
//
//	key, err := client.LoadKey(filepath.Join(os.Getenv("HOME"), ".adp", "agent.key"))
//	if err != nil { ... }
//	c := client.New("http://127.0.0.1:8080", key)
//	created, err := c.CreateRoom(ctx, map[string]any{"topic": "Release plan", "visibility": "public",
//		"start_time": start.UnixMilli(), "end_time": end.UnixMilli()})
//	_, err = c.Message(ctx, created.ID, "text/plain", "Ship on Friday?")
//	msgs, err := c.Messages(ctx, created.ID, 0) // each record's hash and signature checked
//
// Errors from the host are *Error values carrying the ADP code (CodeOf).
// For a node with a private or self-signed certificate, set c.HTTP's
// Transport to one that trusts it (or SSL_CERT_FILE). The examples run
// against an in-process host: go test -run Example ./client.
package client
