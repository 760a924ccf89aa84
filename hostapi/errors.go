package hostapi

import (
	"net/http"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/node"
)

// statusByCode is the one table mapping ADP error codes to HTTP statuses
// (DECISIONS 4). The README's error table is generated from the same list.
var statusByCode = map[adp.Code]int{
	adp.CodeInvalidRequest:          http.StatusBadRequest,
	adp.CodeInvalidEvent:            http.StatusBadRequest,
	adp.CodeInvalidEventHash:        http.StatusBadRequest,
	adp.CodeInvalidSignature:        http.StatusBadRequest,
	adp.CodeInvalidActor:            http.StatusBadRequest,
	adp.CodeTimestampOutOfWindow:    http.StatusBadRequest,
	adp.CodeTypeNotDefined:          http.StatusBadRequest,
	adp.CodeInvalidToken:            http.StatusUnauthorized,
	adp.CodePermissionDenied:        http.StatusForbidden,
	adp.CodeApprovalRequired:        http.StatusForbidden,
	adp.CodeJoinRequestNotApproved:  http.StatusForbidden,
	adp.CodeJoinRequestRoleMismatch: http.StatusForbidden,
	adp.CodeMemberBanned:            http.StatusForbidden,
	adp.CodeRoleNotAllowed:          http.StatusForbidden,
	adp.CodeMaxSpeakersExceeded:     http.StatusForbidden,
	adp.CodeMembershipRequired:      http.StatusForbidden,
	adp.CodeTypeDisabled:            http.StatusForbidden,
	adp.CodeRoomNotFound:            http.StatusNotFound,
	adp.CodeJoinRequestNotFound:     http.StatusNotFound,
	adp.CodeAgentStatusNotFound:     http.StatusNotFound,
	adp.CodeNotFound:                http.StatusNotFound,
	adp.CodeRoomHeadMismatch:        http.StatusConflict,
	adp.CodeBaseRecordMismatch:      http.StatusConflict,
	adp.CodeNonceNotGreater:         http.StatusConflict,
	adp.CodeRoomNotActive:           http.StatusConflict,
	adp.CodeRoomEnded:               http.StatusConflict,
	adp.CodeJoinRequestExpired:      http.StatusConflict,
	node.CodeArchiveUnavailable:     http.StatusConflict,
	adp.CodePayloadTooLarge:         http.StatusRequestEntityTooLarge,
	adp.CodePayloadSchemaViolation:  http.StatusUnprocessableEntity,
	adp.CodePackUnavailable:         http.StatusUnprocessableEntity,
	adp.CodeRateLimited:             http.StatusTooManyRequests,
	adp.CodeUnavailable:             http.StatusServiceUnavailable,
	adp.CodeInternal:                http.StatusInternalServerError,
}

// StatusOf returns the HTTP status for an ADP error code.
func StatusOf(c adp.Code) int {
	if s, ok := statusByCode[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorCodes lists every code the host can answer, in table order.
func ErrorCodes() map[adp.Code]int {
	out := make(map[adp.Code]int, len(statusByCode))
	for k, v := range statusByCode {
		out[k] = v
	}
	return out
}
