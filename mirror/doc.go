// Package mirror keeps verified Badger replicas of other hosts' public
// rooms. A record is stored only after its envelope hash and signature
// verify, its record hash recomputes, its seq and pre_hash continue the
// stored chain, it is vouched for by a host-signed checkpoint (directly or
// through the hash chain), and the kernel's replay admits it with the type
// registry in force. Gaps are backfilled from the host or any peer;
// conflicting host checkpoints become equivocation evidence; verified tips
// are cosigned as a witness. Mirrored rooms are served read-only in the
// host's read shapes.
package mirror
