package adpmcp

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
)

// liveRooms keeps one live connection (the client's verified Follow) per
// room that a wait or a resource subscription is watching, at most max at
// once. A room whose stream the host refuses (not a member of a public
// room) is polled instead. A room is let go lingerFor after its last
// user, so that consecutive waits share one connection.
type liveRooms struct {
	s     *Server
	max   int
	mu    sync.Mutex
	rooms map[string]*liveRoom
	wg    sync.WaitGroup
}

const lingerFor = 2 * time.Minute

type liveRoom struct {
	rr     roomRef
	cancel context.CancelFunc
	refs   int
	idle   *time.Timer

	mu      sync.Mutex
	head    int64
	wake    chan struct{} // closed and replaced when the head moves
	mention bool          // a record since the last notification mentions the agent

	notify chan struct{} // cap 1: coalesces notifications
}

func newLiveRooms(s *Server, max int) *liveRooms {
	return &liveRooms{s: s, max: max, rooms: map[string]*liveRoom{}}
}

// acquire starts (or shares) the live connection of a room; release
// gives it back.
func (l *liveRooms) acquire(rr roomRef, head int64) (*liveRoom, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s.ctx.Err() != nil {
		return nil, nil, errors.New("server closed")
	}
	lr := l.rooms[rr.url]
	if lr == nil {
		if len(l.rooms) >= l.max {
			return nil, nil, &toolError{Code: "too_many_rooms", Message: "this server follows at most " + strconv.Itoa(l.max) + " rooms live at once",
				Hint: "wait on fewer rooms, or unsubscribe from room transcripts you no longer need"}
		}
		ctx, cancel := context.WithCancel(l.s.ctx)
		lr = &liveRoom{rr: rr, cancel: cancel, head: head, wake: make(chan struct{}), notify: make(chan struct{}, 1)}
		l.rooms[rr.url] = lr
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			l.run(ctx, lr)
		}()
		go func() {
			defer l.wg.Done()
			l.notifier(ctx, lr)
		}()
	}
	if lr.idle != nil {
		lr.idle.Stop()
		lr.idle = nil
	}
	lr.refs++
	var once sync.Once
	return lr, func() { once.Do(func() { l.release(lr) }) }, nil
}

func (l *liveRooms) release(lr *liveRoom) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lr.refs--
	if lr.refs > 0 {
		return
	}
	lr.idle = time.AfterFunc(lingerFor, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if lr.refs == 0 && l.rooms[lr.rr.url] == lr {
			delete(l.rooms, lr.rr.url)
			lr.cancel()
		}
	})
}

// count is the number of live rooms.
func (l *liveRooms) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.rooms)
}

func (l *liveRooms) close() {
	l.mu.Lock()
	for k, lr := range l.rooms {
		if lr.idle != nil {
			lr.idle.Stop()
		}
		lr.cancel()
		delete(l.rooms, k)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// changed returns the channel closed at the next head move, and the head.
func (lr *liveRoom) changed() (<-chan struct{}, int64) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.wake, lr.head
}

func (lr *liveRoom) moved(seq int64) bool {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if seq <= lr.head {
		return false
	}
	lr.head = seq
	close(lr.wake)
	lr.wake = make(chan struct{})
	return true
}

// run follows the room until ctx ends: the verified live stream, with the
// client's reconnect and backoff; polling when the host refuses it.
func (l *liveRooms) run(ctx context.Context, lr *liveRoom) {
	c, id := lr.rr.c, lr.rr.id
	_, after := lr.changed()
	me := string(l.s.cfg.Key.ID)
	err := c.FollowWith(ctx, id, after, l.s.cfg.FollowOptions, func(rec *record.Record) error {
		if lr.moved(rec.Seq) {
			lr.signal(mentionsMe(rec, me))
		}
		return nil
	})
	if ctx.Err() != nil {
		return
	}
	var se *client.StreamEnd
	if errors.As(err, &se) && terminalEnd(se.Reason) {
		return
	}
	l.s.log.Debug("live stream unavailable; polling", "room", lr.rr.url, "err", err)
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
		cctx, cancel := context.WithTimeout(ctx, answerTimeout)
		r, err := c.Room(cctx, id)
		cancel()
		if err == nil && lr.moved(r.Head.Seq) {
			lr.signal(false)
		}
	}
}

// signal asks the notifier to tell subscribers; it never blocks, so a
// slow session cannot make records pile up behind the live stream: a
// burst of records is one notification.
func (lr *liveRoom) signal(mention bool) {
	if mention {
		lr.mu.Lock()
		lr.mention = true
		lr.mu.Unlock()
	}
	select {
	case lr.notify <- struct{}{}:
	default:
	}
}

// notifier sends the coalesced resource notifications of a room.
func (l *liveRooms) notifier(ctx context.Context, lr *liveRoom) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-lr.notify:
		}
		lr.mu.Lock()
		mention := lr.mention
		lr.mention = false
		lr.mu.Unlock()
		l.s.roomUpdated(lr.rr, mention)
	}
}

func terminalEnd(reason string) bool {
	return reason == "room_ended" || reason == "room_cancelled"
}

// roomUpdated tells subscribed sessions that a room's transcript changed,
// and that the inbox did when the record mentions the agent.
func (s *Server) roomUpdated(rr roomRef, mention bool) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	_ = s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: transcriptURI(rr)})
	_ = s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: transcriptURI(rr) + ".json"})
	if mention {
		_ = s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: inboxURI})
	}
}

func mentionsMe(rec *record.Record, me string) bool {
	env, err := identity.ParseEnvelope(rec.Envelope)
	if err != nil {
		return false
	}
	for _, m := range env.Event.Mentions {
		if m == me {
			return true
		}
	}
	return false
}
