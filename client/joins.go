package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/adpnode/adpnode/adp/record"
)

// JoinRequest is a join request with its review state (§11).
type JoinRequest struct {
	Request      json.RawMessage `json:"request"`
	Status       string          `json:"status"`
	ApprovedRole string          `json:"approved_role"`
	ReviewReason string          `json:"review_reason"`
	ReviewedBy   *string         `json:"reviewed_by"`
	ReviewedAt   *int64          `json:"reviewed_at"`
}

// ID returns the request's ID.
func (j *JoinRequest) ID() string {
	var f struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(j.Request, &f)
	return f.ID
}

// RequestJoin creates a join request for role.
func (c *Client) RequestJoin(ctx context.Context, roomID, role, perspective, reason string) (*JoinRequest, error) {
	body, _ := json.Marshal(map[string]any{"role": role, "perspective": perspective, "reason": reason})
	var out JoinRequest
	_, err := c.do(ctx, http.MethodPost, "/v1/rooms/"+roomID+"/join-requests", body, true, &out)
	return &out, err
}

// JoinRequest reads one join request (applicant, creator or moderator).
func (c *Client) JoinRequest(ctx context.Context, roomID, id string) (*JoinRequest, error) {
	var out JoinRequest
	_, err := c.do(ctx, http.MethodGet, "/v1/rooms/"+roomID+"/join-requests/"+id, nil, true, &out)
	return &out, err
}

// JoinRequests lists a room's join requests (creator or moderator).
func (c *Client) JoinRequests(ctx context.Context, roomID, status string) ([]*JoinRequest, error) {
	var out struct {
		Result []*JoinRequest `json:"result"`
	}
	q := ""
	if status != "" {
		q = "?status=" + status
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/rooms/"+roomID+"/join-requests"+q, nil, true, &out)
	return out.Result, err
}

// Review approves (with role) or rejects a pending request by signing a
// room.join.review carrying the request's immutable object.
func (c *Client) Review(ctx context.Context, roomID string, jr *JoinRequest, approve bool, role, reason string) (*record.Record, error) {
	payload := map[string]any{"request": jr.Request, "decision": "reject"}
	if approve {
		payload["decision"], payload["role"] = "approve", role
	}
	if reason != "" {
		payload["reason"] = reason
	}
	return c.Post(ctx, roomID, 5, func(*Room, []*record.Record) (string, any, error) { return "room.join.review", payload, nil })
}

// Join sends room.join: directly for public rooms (requestID ""), or with
// an approved request.
func (c *Client) Join(ctx context.Context, roomID, role, perspective, requestID string) (*record.Record, error) {
	payload := map[string]any{"role": role}
	if requestID != "" {
		payload["request_id"] = requestID
	} else if perspective != "" {
		payload["perspective"] = perspective
	}
	return c.Post(ctx, roomID, 5, func(*Room, []*record.Record) (string, any, error) { return "room.join", payload, nil })
}

// PublicRooms lists the directory (federated by default).
func (c *Client) PublicRooms(ctx context.Context, query string) (json.RawMessage, error) {
	var raw json.RawMessage
	p := "/v1/rooms/public"
	if query != "" {
		p += "?" + query
	}
	_, err := c.do(ctx, http.MethodGet, p, nil, false, &raw)
	return raw, err
}
