package hostlog

import (
	"context"
	"fmt"

	"github.com/transparency-dev/tessera"
)

// tessera's appender polls its log reader's IntegratedSize and NextIndex
// ten times a second, for the whole life of the log, to feed
// OpenTelemetry gauges (appender integrated size, next index,
// integration latency) that this node does not export; on the POSIX
// driver each poll reads and parses the tree-state file. That loop was
// the largest part of an idle node's CPU. The appender has no option to
// turn it off, so the log hands tessera a reader whose two size methods
// answer 0 without touching the disk, and keeps the driver's real reader
// for itself.

// appendLifecycle is the method tessera.NewAppender calls on a driver.
type appendLifecycle interface {
	Appender(context.Context, *tessera.AppendOptions) (*tessera.Appender, tessera.LogReader, error)
}

// quietDriver wraps a tessera driver: the appender it builds gets a
// quietReader, and real is the driver's own reader.
type quietDriver struct {
	inner appendLifecycle
	ctx   context.Context // the log's: the driver's goroutines live as long
	real  tessera.LogReader
}

func newQuietDriver(ctx context.Context, d tessera.Driver) (*quietDriver, error) {
	lc, ok := d.(appendLifecycle)
	if !ok {
		return nil, fmt.Errorf("tessera driver %T has no appender lifecycle", d)
	}
	return &quietDriver{inner: lc, ctx: ctx}, nil
}

// Appender implements tessera's appender lifecycle on the log's context,
// whatever context tessera passes.
func (d *quietDriver) Appender(_ context.Context, opts *tessera.AppendOptions) (*tessera.Appender, tessera.LogReader, error) {
	a, r, err := d.inner.Appender(d.ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	d.real = r
	return a, quietReader{r}, nil
}

// quietReader is a log reader whose size methods answer without reading
// anything; only tessera's statistics loop calls them.
type quietReader struct{ tessera.LogReader }

func (quietReader) IntegratedSize(context.Context) (uint64, error) { return 0, nil }
func (quietReader) NextIndex(context.Context) (uint64, error)      { return 0, nil }
