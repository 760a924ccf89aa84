// Package directory is the model of the room directory (§18): the entry a
// host lists for each room (Entry), the filters (Filter), the order, paging
// with an opaque cursor (Page), and the merge of this host's rooms with the
// rooms learned from the federation (Merge).
//
// It is pure: no I/O, goroutines or clock. The host builds entries from its
// rooms, the index from signed announcements, attention matches its
// subscriptions with Filter, and hostapi pages the result.
package directory
