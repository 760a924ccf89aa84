package seal

import (
	"encoding/json"
	"fmt"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/jsonobj"
	"github.com/adpnode/adpnode/adp/types"
)

// EventContentType is the sealed content type of a custom event of kind
// message (round.turn, deal.receipt, question.create, ...) sent in a
// member-only room. The event travels as a sealed message.create whose
// plaintext content is {"type", "payload"}: the host sees neither the
// payload nor which type was sent (docs/sealed-rooms.md, decision 23).
const EventContentType = "application/vnd.adpnode.event+json"

// InnerEvent is the content of an EventContentType plaintext.
type InnerEvent struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// EventInner wraps a custom event's type and payload (a JSON object) as
// the plaintext of a sealed message.create.
func EventInner(typ string, payload json.RawMessage) (Inner, error) {
	b, err := json.Marshal(InnerEvent{Type: typ, Payload: payload})
	if err != nil {
		return Inner{}, err
	}
	return Inner{ContentType: EventContentType, Content: b}, nil
}

// ParseInnerEvent reads an EventContentType content: a closed object with
// a type name and an object payload.
func ParseInnerEvent(content []byte) (*InnerEvent, error) {
	var e InnerEvent
	if err := jsonobj.Unmarshal(content, &e, "type", "payload"); err != nil {
		return nil, fmt.Errorf("sealed event must be {type, payload}: %v", err)
	}
	if e.Type == "" {
		return nil, fmt.Errorf("sealed event has no type")
	}
	if len(e.Payload) == 0 || e.Payload[0] != '{' {
		return nil, fmt.Errorf("sealed %s: payload must be a JSON object", e.Type)
	}
	return &e, nil
}

// SealsAsEvent reports whether a type must travel sealed in a member-only
// room: a room-defined (custom) type of kind message. Built-ins and
// signal or control types are not sealed.
func SealsAsEvent(reg *types.Registry, typ string) bool {
	if types.IsBuiltin(typ) || reg == nil {
		return false
	}
	def, ok := reg.Lookup(typ)
	return ok && def.Kind == adp.KindMessage
}

// SentAs is the room as it was when a sealed message.create was admitted:
// the type registry in force and the sender's role. A member checks an
// opened event against it, as the host would have checked the plaintext.
type SentAs struct {
	Registry *types.Registry // copy-on-write in room.State: a stable snapshot
	Role     adp.Role
	Creator  bool
}

// CheckEvent applies to an opened event the rules the host applies to a
// plaintext custom event (§13.6, §14): the type is declared in the room
// and usable, of kind message, the sender's role may send it, and the
// payload passes the type's schema. A failure is a reason to flag the
// event, never to use it.
func (s SentAs) CheckEvent(e *InnerEvent) error {
	if types.IsBuiltin(e.Type) {
		return fmt.Errorf("sealed event: %s is a built-in type", e.Type)
	}
	if s.Registry == nil {
		return fmt.Errorf("sealed event: the room's types at its seq are unknown")
	}
	def, ok := s.Registry.Lookup(e.Type)
	if !ok {
		return fmt.Errorf("sealed event: type %q is not defined in the room", e.Type)
	}
	if !def.Usable() {
		return fmt.Errorf("sealed event: type %q is disabled in the room", e.Type)
	}
	if def.Kind != adp.KindMessage {
		return fmt.Errorf("sealed event: type %q is of kind %s, not message", e.Type, def.Kind)
	}
	if !s.Creator && !def.RoleAllowed(s.Role) {
		return fmt.Errorf("sealed event: the sender's role %s may not send %s", s.Role, e.Type)
	}
	if err := def.ValidatePayload(e.Payload); err != nil {
		return fmt.Errorf("sealed event: %s payload: %w", e.Type, err)
	}
	return nil
}

// RequiredErr is the host's refusal of a plaintext custom event of kind
// message in a member-only room.
func RequiredErr(typ string) error {
	return adp.Reason(adp.CodePayloadSchemaViolation, "seal_required",
		"this room is member-only: "+typ+" is of kind message and must be sent sealed (a message.create with content type "+EventContentType+" inside)").
		WithData("type", typ)
}
