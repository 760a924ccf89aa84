//go:build tools

// Package omniwitness pins transparency-dev's omniwitness for the interop
// test in cmd/adpnode (witness_interop_test.go), which builds it with
// `go build` from this module so that it stays out of the daemon's go.mod.
package omniwitness

import _ "github.com/transparency-dev/witness/cmd/omniwitness"
