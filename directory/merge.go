package directory

// Merge is the federated directory: this host's listed rooms, then the
// remote rooms of hosts whose binding is verified, each room ID once (the
// local entry wins; of two remote entries for one ID, the first). Every
// entry returned has Verified set; private rooms are left out. The inputs
// are not modified.
func Merge(local, remote []Entry) []Entry {
	verified := true
	out := make([]Entry, 0, len(local)+len(remote))
	seen := make(map[string]bool, len(local)+len(remote))
	add := func(list []Entry) {
		for _, e := range list {
			if !e.Listed() || seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			e.Verified = &verified
			out = append(out, e)
		}
	}
	add(local)
	add(remote)
	return out
}
