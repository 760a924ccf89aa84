package adp

// Protocol is the value of event.protocol for every ADP event (§5.1).
const Protocol = "agent-discourse/1.0"

// Role is a participation role (§10.1).
type Role string

// The three roles of ADP 1.0.
const (
	RoleModerator Role = "moderator"
	RoleSpeaker   Role = "speaker"
	RoleObserver  Role = "observer"
)

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool {
	return r == RoleModerator || r == RoleSpeaker || r == RoleObserver
}

// Speaking reports whether r counts against max_speakers (DECISIONS 14).
func (r Role) Speaking() bool { return r == RoleModerator || r == RoleSpeaker }

// Kind is the permission and freshness class of an event type (§13.1).
type Kind string

// The three kinds.
const (
	KindMessage Kind = "message"
	KindSignal  Kind = "signal"
	KindControl Kind = "control"
)

// Valid reports whether k is one of the three kinds.
func (k Kind) Valid() bool { return k == KindMessage || k == KindSignal || k == KindControl }

// DefaultRoles returns the kind's default senders (§13.1).
func (k Kind) DefaultRoles() []Role {
	switch k {
	case KindMessage:
		return []Role{RoleModerator, RoleSpeaker}
	case KindSignal:
		return []Role{RoleModerator, RoleSpeaker, RoleObserver}
	case KindControl:
		return []Role{RoleModerator}
	}
	return nil
}
