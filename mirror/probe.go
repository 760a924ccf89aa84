package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/room"
)

// probeTimeout bounds how long adding a room target may wait for the
// room's host to answer.
const probeTimeout = 5 * time.Second

// checkRoomTarget makes a room target fail fast with the reason when the
// room cannot be mirrored: it is announced as not public, the host does
// not answer, or the host has no public room at that URL. A public room
// the index already holds is accepted without asking its host.
func (m *Mirror) checkRoomTarget(ctx context.Context, roomURL string) error {
	for _, e := range m.idx.Entries(m.now(), false) {
		if e.Room.URL == roomURL {
			return notPublic(e.Room.Visibility)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, roomURL, nil)
	if err != nil {
		return adp.Reason(adp.CodeInvalidRequest, "target", "a room target is a Room URL: scheme://host/v1/rooms/<room id>")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := m.probe.Do(req)
	if err != nil {
		why := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			why = "no answer within " + probeTimeout.String()
		}
		return &adp.Error{Code: adp.CodeUnavailable, Message: "the room's host could not be reached: " + why,
			Data: map[string]any{"reason": "host_unreachable", "room_url": roomURL}}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return &adp.Error{Code: adp.CodeRoomNotFound, Message: "the host has no public room at that URL (it is unknown, or private)",
			Data: map[string]any{"reason": "room_not_found", "room_url": roomURL}}
	case resp.StatusCode/100 != 2:
		return &adp.Error{Code: adp.CodeUnavailable, Message: "the room's host answered " + resp.Status,
			Data: map[string]any{"reason": "host_error", "room_url": roomURL}}
	}
	var res struct {
		Visibility string `json:"visibility"`
	}
	if json.Unmarshal(b, &res) != nil || res.Visibility == "" {
		return &adp.Error{Code: adp.CodeUnavailable, Message: "the Room URL did not answer with an ADP room resource",
			Data: map[string]any{"reason": "not_a_room", "room_url": roomURL}}
	}
	return notPublic(res.Visibility)
}

// notPublic refuses rooms that are not public: mirrors serve public
// rooms only.
func notPublic(visibility string) error {
	if visibility == room.Public {
		return nil
	}
	return &adp.Error{Code: adp.CodePermissionDenied, Message: "only public rooms can be mirrored; this room is " + visibility,
		Data: map[string]any{"reason": "room_not_public", "visibility": visibility}}
}
