package hostport

import (
	"encoding/json"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
)

// JoinRequest is a stored join request (§11): the immutable fact object plus
// its review state. Its JSON form is what the host stores.
type JoinRequest struct {
	Request      json.RawMessage   `json:"request"` // canonical fact object
	Status       string            `json:"status"`  // pending, approved, rejected (expired is derived)
	ApprovedRole adp.Role          `json:"approved_role,omitempty"`
	ReviewReason string            `json:"review_reason,omitempty"`
	ReviewedBy   *identity.AgentID `json:"reviewed_by"`
	ReviewedAt   *int64            `json:"reviewed_at"`
	ConsumedSeq  int64             `json:"consumed_seq,omitempty"`

	// Parsed fact fields.
	ID          string           `json:"-"`
	RoomID      string           `json:"-"`
	Applicant   identity.AgentID `json:"-"`
	Role        adp.Role         `json:"-"`
	Perspective string           `json:"-"`
	CreatedAt   int64            `json:"-"`
	ExpiresAt   int64            `json:"-"`
}

// View returns the HTTP shape of the request at now: status becomes
// "expired" once an unconsumed request passes expires_at.
func (j *JoinRequest) View(now int64) map[string]any {
	status := j.Status
	if j.ConsumedSeq == 0 && now >= j.ExpiresAt && status != "rejected" {
		status = "expired"
	}
	v := map[string]any{"request": j.Request, "status": status, "reviewed_by": j.ReviewedBy, "reviewed_at": j.ReviewedAt}
	if j.ApprovedRole != "" {
		v["approved_role"] = j.ApprovedRole
	} else {
		v["approved_role"] = nil
	}
	if j.ReviewReason != "" {
		v["review_reason"] = j.ReviewReason
	} else {
		v["review_reason"] = nil
	}
	if j.ConsumedSeq > 0 {
		v["consumed_seq"] = j.ConsumedSeq
	}
	return v
}

// Terminal reports whether r can no longer change at now: rejected,
// consumed, or expired unconsumed.
func (j *JoinRequest) Terminal(now int64) bool {
	return j.Status == "rejected" || j.ConsumedSeq > 0 || now >= j.ExpiresAt
}
