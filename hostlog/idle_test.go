package hostlog_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/testwait"
)

// TestIdleLogRunsNoStatisticsLoop: tessera's appender polls the log's
// size ten times a second for OpenTelemetry gauges nobody exports (on
// the POSIX driver, a read of the tree-state file each time); the host
// log ends that loop once the appender is built, and still logs and
// proves records, across a restart.
// Property: an idle host log does not wake ten times a second to read
// its tree state.
func TestIdleLogRunsNoStatisticsLoop(t *testing.T) {
	e := newEnv(t)
	statsLoops := func() int {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		return strings.Count(string(buf), "tessera.(*integrationStats).updateStats")
	}
	testwait.Until(t, 20*time.Second, "tessera's statistics loop ended", func() bool { return statsLoops() == 0 })
	for range 10 {
		e.src.accept("room-a")
	}
	e.checkAll(e.waitSize(10))
	e.close()
	e.open()
	testwait.Until(t, 20*time.Second, "no statistics loop after a restart", func() bool { return statsLoops() == 0 })
	e.src.accept("room-b")
	e.checkAll(e.waitSize(11))
}
