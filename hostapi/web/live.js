// The live stream of a room page: a viewer token and the viewer SSE stream
// for rooms hosted here, the mirror's stream for mirrored rooms; reconnects
// with back-off until the room ends or the page goes.
(function (V) {
  'use strict';

  const { h, api, enc } = V;

  // liveStream(rp, hooks): rp is the room page (src, state, timer); hooks
  // are onRecord(rec) for every streamed record, onOpen() once subscribed
  // (read history then, §17.3) and onEnded(status) when the room is over.
  function liveStream(rp, hooks) {
    const src = rp.src;
    const el = h('span', { class: 'live', data: { state: 'off' }, text: '' });
    let es = null;
    let stopped = false;
    let backoff = 1000;

    function set(s, text) {
      el.dataset.state = s;
      el.textContent = text;
    }

    const gone = () => stopped || rp.state.destroyed;

    async function connect() {
      if (gone()) return;
      set('connecting', '○ connecting…');
      let url;
      try {
        if (src.kind === 'local') {
          const t = await api('/v1/viewer-tokens', { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify({ room_id: src.id }) });
          url = src.base + '/events/view?token=' + enc(t.token);
        } else {
          url = src.base + '/events/live' + src.q;
        }
      } catch (err) {
        if (err.code === 'room_ended') return hooks.onEnded();
        if (err.code === 'membership_required' || err.code === 'room_not_found') return set('off', 'not live');
        return retry();
      }
      if (gone()) return;
      const stream = new EventSource(url);
      es = stream;
      stream.addEventListener('room.event', (e) => {
        let rec;
        try {
          rec = JSON.parse(e.data);
        } catch (err) {
          return;
        }
        hooks.onRecord(rec);
      });
      stream.onopen = () => {
        backoff = 1000;
        set('live', '● live');
        hooks.onOpen(); // subscribe first, then read history (§17.3)
      };
      stream.onerror = () => {
        if (gone()) return;
        if (stream.readyState === EventSource.CLOSED) {
          stream.close();
          if (es === stream) es = null;
          retry();
        } else {
          set('connecting', '○ reconnecting…');
        }
      };
    }

    async function retry() {
      if (gone()) return;
      set('connecting', '○ reconnecting…');
      try {
        const res = await api(src.room);
        if (res.status === 'ended' || res.status === 'cancelled') return hooks.onEnded(res.status);
      } catch (err) { /* keep trying */ }
      rp.timer(connect, backoff);
      backoff = Math.min(backoff * 2, 30000);
    }

    // stop closes the stream for good and, given a state, shows it.
    function stop(s, text) {
      stopped = true;
      if (es) {
        es.close();
        es = null;
      }
      if (s) set(s, text);
    }

    return { el, connect, set, stop };
  }

  Object.assign(V, { liveStream });
})(window.ADPViewer = window.ADPViewer || {});
