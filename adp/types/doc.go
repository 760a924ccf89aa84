// Package types implements the ADP type system (ADP §13): built-in event
// types, custom type definitions with their JSON Schemas (draft 2020-12,
// self-contained), registered and external type packs, type declarations and
// the per-room type registry.
//
// The package is part of the pure kernel: it does no I/O, starts no
// goroutines and never reads the clock. External pack documents are supplied
// by the caller through a PackSource. Every error it returns is an
// *adp.Error.
//
// Definitions, packs and their compiled schemas are immutable once built and
// may be shared between registries and goroutines; callers must not modify
// the slices they expose.
package types
