// Package storelayout is the one table of the node's Badger key spaces:
// every key prefix (or single key) any package writes or reads, the package
// that owns it, the shape of its keys and values, and the storage layout
// version since which it exists. The owning packages take their prefixes
// from the constants here, so the table is the truth; its tests check that
// no prefix is a prefix of another, that every entry is used by its owner,
// that no package defines a key prefix of its own, and that docs/storage.md
// renders this table.
package storelayout

// Version is the storage layout the node writes under KeyLayout. Version 2
// added record hashes to the envelope index and room-state snapshots (a
// data dir without the key is upgraded at start by one full replay);
// version 3 added the room registry (h/), written at start for a version 2
// dir (no replay).
const Version = 3

// The host's rooms (package node).
const (
	Record   = "r/"       // r/<room>/<seq:8 BE>
	Envelope = "e/"       // e/<hash:32>
	Nonce    = "n/"       // n/<agent id>
	JoinReq  = "j/"       // j/<room>/<request id>
	Archive  = "x/"       // x/<room>
	Pack     = "p/"       // p/<digest>
	Snapshot = "s/"       // s/<room>
	Room     = "h/"       // h/<room>
	Terminal = "t/"       // t/<room>
	Member   = "a/"       // a/<agent id>/<room>
	Feed     = "f/"       // f/<feed seq:8 BE>
	FeedPos  = "fp/"      // fp/<follower>
	Profile  = "pr/"      // pr/<agent id>
	Layout   = "v/layout" // the single key holding Version
	// Restored is written by a restore from a backup: a fresh random ID,
	// so that what a data dir hands out (attention's stream IDs) can tell
	// a restored copy from the dir it was backed up from.
	Restored = "v/restored"
	// HostCosignature held witnesses' checkpoint.cosign assertions of
	// this host's rooms; retired (the host log's witnesses replace them),
	// dropped at start.
	HostCosignature = "w/" // w/<room>/<witness key>
)

// Mirrors of other hosts' rooms (package mirror), the index and the
// federation's binding checks.
const (
	Mirror            = "m/" // the mirror's namespace (not a key space itself)
	MirrorTarget      = Mirror + "t/"
	MirrorMeta        = Mirror + "m/"
	MirrorRecord      = Mirror + "r/"
	MirrorCheckpoint  = Mirror + "c/"
	MirrorEvidence    = Mirror + "e/"
	MirrorWitness     = Mirror + "w/"
	MirrorHash        = Mirror + "x/"
	MirrorSnapshot    = Mirror + "s/"
	MirrorTlogWitness = Mirror + "l/"
	MirrorHostLog     = Mirror + "p/"
	MirrorFeed        = Mirror + "f/"
	MirrorFeedPos     = Mirror + "fp/"
	IndexEntry        = "i/"
	IndexConflict     = "ic/"
	IndexOwn          = "io/"
	FederationBinding = "fv/"
)

// The host's transparency log journal (package hostlog).
const (
	TlogPart  = "l/p/"    // l/p/<part:8 BE>
	TlogRun   = "l/r/"    // l/r/<room>/<last seq:8 BE>
	TlogMark  = "l/w/"    // l/w/<room>
	TlogNext  = "l/n"     // the journal length
	TlogClean = "l/clean" // retired: the clean-stop mark
	TlogFence = "l/fence" // restored from a backup: hold the log back
	// TlogIndex and TlogHash were journal v1 (two keys per leaf); retired,
	// converted to parts and runs at start.
	TlogIndex = "l/i/" // l/i/<index:8 BE>
	TlogHash  = "l/h/" // l/h/<hash:32>
	// TlogCosigned is the newest checkpoint witnesses cosigned (package witness).
	TlogCosigned = "l/cosigned"
)

// Attention (package attention).
const (
	Attention         = "at/" // the package's namespace (not a key space itself)
	AttentionInstance = Attention + "id"
	AttentionSub      = Attention + "s/"
	AttentionFeed     = Attention + "f/"
	AttentionMatch    = Attention + "x/"
	AttentionMention  = Attention + "m/"
	AttentionInbox    = Attention + "mh/"
	AttentionWater    = Attention + "w/"
	AttentionPass     = Attention + "lp"
	AttentionPrivate  = Attention + "mp/"
	AttentionSeen     = Attention + "rs"
	AttentionVersion  = Attention + "v"
)

// ReadyProbe is a key that is never written: the readiness check reads it
// to see that storage answers (a missing key is an answer).
const ReadyProbe = "readyz"

// Space is one row of the table.
type Space struct {
	Name   string // the constant in this package
	Prefix string
	// Single: a single key rather than a prefix of many.
	Single bool
	Owner  string // the package (directory in the module) that reads and writes it
	Key    string // the key's shape
	Value  string // the value's shape
	Since  int    // the layout version since which the space exists
}

// Table lists every key space of the node's Badger database.
var Table = []Space{
	{"Record", Record, false, "node", "r/<room>/<seq:8 BE>", "record JSON (§15)", 1},
	{"Envelope", Envelope, false, "node", "e/<envelope or record hash:32>", "<room>/<seq:8 BE>", 1},
	{"Nonce", Nonce, false, "node", "n/<agent id>", "nonce:8 BE | accepted_at:8 BE", 1},
	{"JoinReq", JoinReq, false, "node", "j/<room>/<request id>", "join request JSON", 1},
	{"Archive", Archive, false, "node", "x/<room>", "archive generated_at:8 BE", 1},
	{"Pack", Pack, false, "node", "p/<digest>", "external pack bytes", 1},
	{"Snapshot", Snapshot, false, "node", "s/<room>", "room.State.Encode() at some seq", 2},
	{"Room", Room, false, "node", "h/<room>", "empty: the room exists (written with its room.create)", 3},
	{"Terminal", Terminal, false, "node", "t/<room>", "cold room summary JSON, with its final s/<room>", 2},
	{"Member", Member, false, "node", "a/<agent id>/<room>", "flags:1 | role, for cold rooms", 2},
	{"Feed", Feed, false, "node", "f/<feed seq:8 BE>", "record seq:8 BE | record hash:32 | flags:1 | room ID (flags: high bit set; bit 0 the event mentions an agent or reviews a join request, bit 1 its type may change the room's summary; an entry from before flags lacks the byte, its byte 40 a room ID character): the change feed, one entry per stored record, written in the record's transaction, seqs dense in commit order; pruned behind the slowest follower (node.Follow)", 3},
	{"FeedPos", FeedPos, false, "node", "fp/<follower>", "feed seq:8 BE, the last entry the follower handled, written by the follower with its own writes (hostlog: host-log; attention: attention; federation: record-publisher, about once a second); the node reads them to prune", 3},
	{"Profile", Profile, false, "node", "pr/<agent id>", "received_at:8 BE | the agent's latest accepted profile.update envelope, canonical (JCS) and unchanged (agent-profile/1.0; docs/profiles.md)", 3},
	{"Layout", Layout, true, "node", "v/layout", "layout version:8 BE", 2},
	{"Restored", Restored, true, "node", "v/restored", "random ID (hex) written by each restore from a backup", 3},
	{"MirrorTarget", MirrorTarget, false, "mirror", "m/t/<target id>", "Target JSON", 1},
	{"MirrorMeta", MirrorMeta, false, "mirror", "m/m/<host key>/<room>", "roomMeta JSON", 1},
	{"MirrorRecord", MirrorRecord, false, "mirror", "m/r/<host key>/<room>/<seq:8 BE>", "record JSON", 1},
	{"MirrorCheckpoint", MirrorCheckpoint, false, "mirror", "m/c/<host key>/<room>/<seq:8 BE>", "checkpoint assertion", 1},
	{"MirrorEvidence", MirrorEvidence, false, "mirror", "m/e/<host key>/<room>/<seq:8 BE>", "Evidence JSON", 1},
	{"MirrorWitness", MirrorWitness, false, "mirror", "m/w/<host key>/<room>/<witness key>", "retired: checkpoint.cosign of a mirrored room; dropped at start", 2},
	{"MirrorHash", MirrorHash, false, "mirror", "m/x/<host key>/<room>/<hash:32>", "seq:8 BE (envelope and record hashes; written with the record)", 2},
	{"MirrorSnapshot", MirrorSnapshot, false, "mirror", "m/s/<host key>/<room>", "roomSnapshot JSON (room.State at some seq)", 2},
	{"MirrorTlogWitness", MirrorTlogWitness, false, "mirror", "m/l/<log origin>", "JSON {size, hash, note, split}: the tlog-witness's last cosigned checkpoint of a mirrored host's log, and the split view it saw of that log, if any (then it cosigns nothing more of it)", 3},
	{"MirrorHostLog", MirrorHostLog, false, "mirror", "m/p/<host key>/<room>", "JSON {seq, record_hash, known, witnesses, proof}: the host log's proof of an ended room's last record, checked, for extra.host_log of the mirror's archives", 3},
	{"MirrorFeed", MirrorFeed, false, "mirror", "m/f/<feed seq:8 BE>", "record seq:8 BE | record hash:32 | flags:1 | room ID (as f/): the mirror's change feed, one entry per verified record stored, written in the record's transaction (internal/changefeed)", 3},
	{"MirrorFeedPos", MirrorFeedPos, false, "mirror", "m/fp/<follower>", "feed seq:8 BE, the last entry of the mirror's feed the follower handled, written with its own writes (attention); the mirror reads them to prune", 3},
	{"HostCosignature", HostCosignature, false, "node", "w/<room>/<witness key>", "retired: checkpoint.cosign of this host's room; dropped at start", 1},
	{"IndexEntry", IndexEntry, false, "index", "i/<host key>/<room>", "signed announcement (as gossiped)", 1},
	{"IndexConflict", IndexConflict, false, "index", "ic/<first 16 bytes of SHA-256, hex>", "signed announcement claiming another host's room ID (evidence)", 1},
	{"IndexOwn", IndexOwn, false, "index", "io/<room>", "this host's latest signed announcement", 3},
	{"FederationBinding", FederationBinding, false, "federation", "fv/<host key>", "verified binding check JSON", 1},
	{"TlogPart", TlogPart, false, "hostlog", "l/p/<part:8 BE>", "the leaves at indices 256·part … 256·part+255 (fewer in the last part), each record hash:32 | seq:8 BE | len(room):uvarint | room ID; written with l/n, and only indices below it count", 3},
	{"TlogRun", TlogRun, false, "hostlog", "l/r/<room>/<last seq:8 BE>", "first seq:8 BE | first index:8 BE: the room's seqs first … last are the leaves at consecutive indices from first index", 3},
	{"TlogIndex", TlogIndex, false, "hostlog", "l/i/<index:8 BE>", "retired (journal v1): record hash:32 | seq:8 BE | room ID; converted to l/p/ and l/r/ at start", 3},
	{"TlogHash", TlogHash, false, "hostlog", "l/h/<record hash:32>", "retired (journal v1): index:8 BE; dropped at start", 3},
	{"TlogMark", TlogMark, false, "hostlog", "l/w/<room>", "highest logged seq:8 BE", 3},
	{"TlogNext", TlogNext, true, "hostlog", "l/n", "journal length:8 BE (the next leaf index)", 3},
	{"TlogClean", TlogClean, true, "hostlog", "l/clean", "retired: the clean-stop mark of the log before it followed the change feed; deleted at start", 3},
	{"TlogFence", TlogFence, true, "hostlog", "l/fence", "empty: the database was restored from a backup (written by `adpnode restore`); the log publishes nothing beyond the journal until its witnesses confirm they hold no larger tree (deleted then)", 3},
	{"TlogCosigned", TlogCosigned, true, "witness", "l/cosigned", "JSON {note, size, lines: {witness vkey: cosignature/v1 line}}: the newest checkpoint witnesses cosigned", 3},
	{"AttentionInstance", AttentionInstance, true, "attention", "at/id", "random instance ID (stream IDs)", 3},
	{"AttentionSub", AttentionSub, false, "attention", "at/s/<subscription>", "subscription JSON", 3},
	{"AttentionFeed", AttentionFeed, false, "attention", "at/f/<subscription>/<seq:8 BE>", "FeedItem JSON", 3},
	{"AttentionMatch", AttentionMatch, false, "attention", "at/x/<subscription>/<room>", "match state JSON", 3},
	{"AttentionMention", AttentionMention, false, "attention", "at/m/<agent id>/<seq:8 BE>", "stored mention JSON", 3},
	{"AttentionInbox", AttentionInbox, false, "attention", "at/mh/<agent id>", "head:8 BE | floor:8 BE", 3},
	{"AttentionWater", AttentionWater, false, "attention", "at/w/<l|m>/<room>", "seq:8 BE, the highest record seq of the room whose items were derived, written with them (the resync after the change feed was pruned past attention's position)", 3},
	{"AttentionPass", AttentionPass, true, "attention", "at/lp", "retired: when the last pass took its queue (the catch-up before attention followed the change feeds); deleted at start", 3},
	{"AttentionPrivate", AttentionPrivate, false, "attention", "at/mp/<agent id>/<room>", "seq:8 BE, the agent's latest inbox item of this non-public room (the visibility epoch)", 3},
	{"AttentionSeen", AttentionSeen, true, "attention", "at/rs", "the v/restored value at/id was made under (absent: none)", 3},
	{"AttentionVersion", AttentionVersion, true, "attention", "at/v", "version:8 BE of attention's own layout (2: at/mp/ is complete, item times grow with seqs)", 3},
	{"ReadyProbe", ReadyProbe, true, "hostapi", "readyz", "never written: the readiness probe reads it", 1},
}

// Lookup returns the space a stored key belongs to.
func Lookup(key []byte) (Space, bool) {
	for _, s := range Table {
		if s.Single && string(key) == s.Prefix || !s.Single && len(key) >= len(s.Prefix) && string(key[:len(s.Prefix)]) == s.Prefix {
			return s, true
		}
	}
	return Space{}, false
}
