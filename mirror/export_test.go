package mirror

// WantSeqForTest records that seq exists and queues a catch-up: a mirror
// told of records it cannot fetch.
func (r *Room) WantSeqForTest(seq int64) {
	r.wantSeq(seq)
	r.m.queueGap(r)
}
