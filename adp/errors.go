package adp

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable ADP error code (ADP §20, Identity §11).
// Clients branch on it; the HTTP layer maps it to a status in one table.
type Code string

// Error codes of ADP §20 plus the shared Agent Identity codes.
const (
	CodeInvalidRequest          Code = "invalid_request"
	CodeInvalidEvent            Code = "invalid_event"
	CodeInvalidEventHash        Code = "invalid_event_hash"
	CodeInvalidSignature        Code = "invalid_signature"
	CodeInvalidActor            Code = "invalid_actor"
	CodeTimestampOutOfWindow    Code = "timestamp_out_of_window"
	CodeNonceNotGreater         Code = "nonce_not_greater"
	CodeRoomNotFound            Code = "room_not_found"
	CodeRoomNotActive           Code = "room_not_active"
	CodeRoomEnded               Code = "room_ended"
	CodePermissionDenied        Code = "permission_denied"
	CodeApprovalRequired        Code = "approval_required"
	CodeJoinRequestNotFound     Code = "join_request_not_found"
	CodeJoinRequestNotApproved  Code = "join_request_not_approved"
	CodeJoinRequestRoleMismatch Code = "join_request_role_mismatch"
	CodeJoinRequestExpired      Code = "join_request_expired"
	CodeMemberBanned            Code = "member_banned"
	CodeRoleNotAllowed          Code = "role_not_allowed"
	CodeMaxSpeakersExceeded     Code = "max_speakers_exceeded"
	CodeMembershipRequired      Code = "membership_required"
	CodeInvalidToken            Code = "invalid_token"
	CodeRoomHeadMismatch        Code = "room_head_mismatch"
	CodeBaseRecordMismatch      Code = "base_record_mismatch"
	CodeAgentStatusNotFound     Code = "agent_status_not_found"
	CodeRateLimited             Code = "rate_limited"
	CodePayloadTooLarge         Code = "payload_too_large"
	CodeTypeNotDefined          Code = "type_not_defined"
	CodeTypeDisabled            Code = "type_disabled"
	CodePayloadSchemaViolation  Code = "payload_schema_violation"
	CodePackUnavailable         Code = "pack_unavailable"
	CodeNotFound                Code = "not_found"
	// CodeArchiveUnavailable is a host code (not ADP §20): an archive read
	// of a room that has not ended (archives exist once it has, §19).
	CodeArchiveUnavailable Code = "archive_unavailable"
	// CodeRelayFailed is a host code (not ADP §20): a relayed write could
	// not reach the authoritative host, so nothing is known to have been
	// accepted.
	CodeRelayFailed Code = "relay_failed"
	// CodeUntrustedCheckpoint is a witness code (C2SP tlog-witness, not
	// ADP §20): no signature on a submitted checkpoint verifies with the
	// log's key (HTTP 403).
	CodeUntrustedCheckpoint Code = "untrusted_checkpoint"
	// CodeCheckpointStale is a witness code: the submitter's old size is
	// not the size the witness last cosigned, or the checkpoint has that
	// size and another root (reason root_mismatch); data.size is that size
	// (HTTP 409, answered as text/x.tlog.size).
	CodeCheckpointStale Code = "checkpoint_stale"
	// CodeInconsistentCheckpoint is a witness code: the checkpoint is not
	// provably an append-only extension of the one the witness cosigned
	// (a consistency proof that does not verify; HTTP 422).
	CodeInconsistentCheckpoint Code = "inconsistent_checkpoint"
	// CodeUnavailable is not an ADP code: the host answers it when it is
	// overloaded or shutting down (HTTP 503 with Retry-After).
	CodeUnavailable Code = "unavailable"
	// CodeInternal is not an ADP code: an unexpected failure of the host.
	CodeInternal Code = "internal_error"
)

// Error is an ADP protocol error: the code clients branch on, a human message
// and optional structured data (for example the current head on
// room_head_mismatch, or data.reason / data.limit for detail).
type Error struct {
	Code    Code
	Message string
	Data    map[string]any
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Is makes errors.Is(err, &adp.Error{Code: c}) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Reason returns an *Error whose data carries a machine-readable reason, used
// where the spec names no specific code (DECISIONS 18).
func Reason(code Code, reason, message string) *Error {
	return &Error{Code: code, Message: message, Data: map[string]any{"reason": reason}}
}

// WithData returns a copy of e with key set in its data.
func (e *Error) WithData(key string, value any) *Error {
	c := *e
	c.Data = make(map[string]any, len(e.Data)+1)
	for k, v := range e.Data {
		c.Data[k] = v
	}
	c.Data[key] = value
	return &c
}

// CodeOf returns the ADP code carried by err, or CodeInternal when err carries
// none. A nil error has no code.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// AsError returns err as an *Error, wrapping foreign errors as internal ones.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
