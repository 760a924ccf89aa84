// Package httpwire is the HTTP wire form of node answers: the one table
// mapping ADP error codes to HTTP statuses (DECISIONS 4), the error body
// shape, and the answer to a write. hostapi writes these answers to HTTP
// clients; federation relays carry them byte for byte, so an agent that
// submits through another node gets exactly the authoritative host's answer.
package httpwire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/hostport"
)

// statusByCode is the one table of code → HTTP status.
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
	adp.CodeArchiveUnavailable:      http.StatusConflict,
	adp.CodePayloadTooLarge:         http.StatusRequestEntityTooLarge,
	adp.CodePayloadSchemaViolation:  http.StatusUnprocessableEntity,
	adp.CodePackUnavailable:         http.StatusUnprocessableEntity,
	adp.CodeRateLimited:             http.StatusTooManyRequests,
	adp.CodeUnavailable:             http.StatusServiceUnavailable,
	adp.CodeRelayFailed:             http.StatusBadGateway,
	adp.CodeInternal:                http.StatusInternalServerError,
	adp.CodeUntrustedCheckpoint:     http.StatusForbidden,
	adp.CodeCheckpointStale:         http.StatusConflict,
	adp.CodeInconsistentCheckpoint:  http.StatusUnprocessableEntity,
}

// StatusOf returns the HTTP status for an ADP error code.
func StatusOf(c adp.Code) int {
	if s, ok := statusByCode[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Codes returns a copy of the code → status table.
func Codes() map[adp.Code]int {
	out := make(map[adp.Code]int, len(statusByCode))
	for k, v := range statusByCode {
		out[k] = v
	}
	return out
}

// Answer is a complete HTTP answer: status, headers and body.
type Answer struct {
	Status int               `json:"status"`
	Header map[string]string `json:"header,omitempty"`
	Body   []byte            `json:"body"`
	// Code is the ADP code of an error answer (local only, not relayed).
	Code adp.Code `json:"-"`
}

// Marshal encodes v as JSON without HTML escaping (agent content stays
// exactly as signed), with a trailing newline.
func Marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":{"code":"internal_error","message":"encoding failed","data":{}}}` + "\n")
	}
	return buf.Bytes()
}

// Error returns the answer for err: {"error":{"code","message","data"}}
// with the status from the table, Max-Seen-Nonce on nonce rejections and
// Retry-After on rate limits and unavailability. Internal errors are not
// described to clients.
func Error(err error) Answer {
	h := map[string]string{}
	e := adp.AsError(err)
	if v, ok := identity.MaxSeenNonceOf(e); ok {
		h["Max-Seen-Nonce"] = identity.FormatMaxSeenNonce(v)
	}
	if e.Code == adp.CodeInternal {
		e = &adp.Error{Code: adp.CodeInternal, Message: "internal error"}
	}
	switch e.Code {
	case adp.CodeRateLimited, adp.CodeUnavailable:
		// data.retry_after_ms, when the error carries it, in whole
		// seconds rounded up; unavailability without it says 1 s.
		if ms, ok := e.Data["retry_after_ms"].(int64); ok && ms > 0 {
			h["Retry-After"] = strconv.FormatInt((ms+999)/1000, 10)
		} else if e.Code == adp.CodeUnavailable {
			h["Retry-After"] = "1"
		}
	}
	if e.Code == adp.CodeCheckpointStale {
		// C2SP tlog-witness: the body is the witness's size, as text.
		if size, ok := e.Data["size"].(uint64); ok {
			h["Content-Type"] = "text/x.tlog.size"
			return Answer{Status: http.StatusConflict, Header: h, Code: e.Code, Body: append(strconv.AppendUint(nil, size, 10), '\n')}
		}
	}
	data := e.Data
	if data == nil {
		data = map[string]any{}
	}
	msg := e.Message
	if msg == "" {
		msg = string(e.Code)
	}
	return Answer{Status: StatusOf(e.Code), Header: h, Code: e.Code,
		Body: Marshal(map[string]any{"error": map[string]any{"code": e.Code, "message": msg, "data": data}})}
}

// Profile returns the answer to a profile.update (POST /v1/profiles): the
// profile with its envelope, 201 when it replaced the stored one, 200 for
// an exact resubmission; Max-Seen-Nonce always.
func Profile(p *hostport.Profile, err error) Answer {
	if err != nil {
		return Error(err)
	}
	a := Answer{Status: http.StatusCreated, Header: map[string]string{"Max-Seen-Nonce": identity.FormatMaxSeenNonce(p.MaxSeenNonce)},
		Body: Marshal(p)}
	if p.Resubmitted {
		a.Status = http.StatusOK
	}
	return a
}

// Submit returns the answer to a write: the §9 creation shape for
// room.create, the server record otherwise; 201 for a new record, 200 for
// an exact resubmission; Max-Seen-Nonce always.
func Submit(res *hostport.Result, err error) Answer {
	if err != nil {
		return Error(err)
	}
	a := Answer{Status: http.StatusCreated, Header: map[string]string{"Max-Seen-Nonce": identity.FormatMaxSeenNonce(res.MaxSeenNonce)}}
	if res.Resubmitted {
		a.Status = http.StatusOK
	}
	if res.Created {
		a.Header["Location"] = res.URL
		a.Body = Marshal(map[string]any{"id": res.Record.RoomID, "status": res.Status, "url": res.URL, "seq": res.Record.Seq,
			"pre_hash": nil, "hash": res.Record.Hash, "received_at": res.Record.ReceivedAt})
		return a
	}
	b := res.RecordJSON
	if b == nil {
		b, _ = res.Record.MarshalJSON()
	}
	// A fresh slice: RecordJSON is shared with the stored value and the
	// live stream, so it is never appended to in place.
	a.Body = append(append(make([]byte, 0, len(b)+1), b...), '\n')
	return a
}

// Write sends a to w.
func (a Answer) Write(w http.ResponseWriter) {
	for k, v := range a.Header {
		w.Header().Set(k, v)
	}
	if a.Header["Content-Type"] == "" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}
