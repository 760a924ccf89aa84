package verifycmd

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/adpnode/adpnode/adp/archive"
)

// parseChunk is how many records a worker claims at a time.
const parseChunk = 64

// Parse runs step 2 of archive verification (archive.ParseRecord: shape,
// envelope hash, Ed25519 signature, record hash) for every record on
// GOMAXPROCS workers, in chunks claimed in order, while the kernel replays
// the records in order through Get (archive.Options.Parsed). Every record
// is parsed and checked exactly once; nothing is skipped.
type Parse struct {
	raws [][]byte
	out  []archive.Parsed
	done []chan struct{} // closed when chunk k is parsed
	next atomic.Int64    // next chunk to claim
	stop atomic.Bool
	wg   sync.WaitGroup
}

// StartParse starts the workers over raws.
func StartParse(raws [][]byte) *Parse {
	n := len(raws)
	chunks := (n + parseChunk - 1) / parseChunk
	p := &Parse{raws: raws, out: make([]archive.Parsed, n), done: make([]chan struct{}, chunks)}
	for k := range p.done {
		p.done[k] = make(chan struct{})
	}
	workers := min(runtime.GOMAXPROCS(0), chunks)
	for w := 0; w < workers; w++ {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

func (p *Parse) work() {
	defer p.wg.Done()
	for !p.stop.Load() {
		k := int(p.next.Add(1) - 1)
		if k >= len(p.done) {
			return
		}
		end := min((k+1)*parseChunk, len(p.raws))
		for i := k * parseChunk; i < end; i++ {
			p.out[i] = archive.ParseRecord(p.raws[i])
		}
		close(p.done[k])
	}
}

// Get returns step 2 of record i, waiting until its chunk is parsed.
func (p *Parse) Get(i int) archive.Parsed {
	<-p.done[i/parseChunk]
	return p.out[i]
}

// Stop ends the workers (a verification that failed early does not wait
// for the rest) and waits for them.
func (p *Parse) Stop() {
	p.stop.Store(true)
	p.wg.Wait()
}
