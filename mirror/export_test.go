package mirror

import "github.com/adpnode/adpnode/adp/assertion"

// WantSeqForTest records that seq exists and queues a catch-up: a mirror
// told of records it cannot fetch.
func (r *Room) WantSeqForTest(seq int64) {
	r.wantSeq(seq)
	r.m.queueGap(r)
}

// DeliverCosignForTest hands a raw cosignature to the mirror as if it had
// arrived on the witness topic (after the topic's validation).
func (m *Mirror) DeliverCosignForTest(raw []byte) error {
	c, err := assertion.OpenCosign(raw)
	if err != nil {
		return err
	}
	m.deliverCosign(c, "")
	return nil
}
