package main

import (
	"context"
	"log/slog"
	"os"
	"slices"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/gologshim"
	"go.uber.org/zap/zapcore"
)

// libraryLogLevel is the least level of the lines libp2p's own loggers
// write (their default when run alone).
const libraryLogLevel = slog.LevelError

// routeLibraryLogs sends what the libraries serve links write on their
// own through log, so that stderr holds JSON lines only: the log
// package's default logger (quic-go, net/http servers without an
// ErrorLog), go-libp2p's slog loggers (gologshim) and the go-log (zap)
// loggers of the DHT. It is process-wide: serve calls it once, before
// anything starts. go-libp2p-pubsub makes its own stderr handler from the
// GOLOG_ environment when the federation starts; GOLOG_LOG_FMT=json, set
// here unless a format was chosen, makes that one JSON too.
func routeLibraryLogs(log *slog.Logger) {
	slog.SetDefault(log)
	libs := levelFloor{h: log.Handler(), min: libraryLogLevel}
	gologshim.SetDefaultHandler(libs)
	golog.SetPrimaryCore(&zapToSlog{h: log.Handler()})
	if os.Getenv("GOLOG_LOG_FORMAT") == "" && os.Getenv("GOLOG_LOG_FMT") == "" {
		_ = os.Setenv("GOLOG_LOG_FMT", "json")
	}
}

// levelFloor passes records at min or above to h.
type levelFloor struct {
	h   slog.Handler
	min slog.Level
}

func (f levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.h.Enabled(ctx, l)
}
func (f levelFloor) Handle(ctx context.Context, r slog.Record) error { return f.h.Handle(ctx, r) }
func (f levelFloor) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFloor{h: f.h.WithAttrs(a), min: f.min}
}
func (f levelFloor) WithGroup(name string) slog.Handler {
	return levelFloor{h: f.h.WithGroup(name), min: f.min}
}

// zapToSlog is a zap core writing to a slog handler (go-log keeps each
// logger's level: error unless GOLOG_LOG_LEVEL says otherwise).
type zapToSlog struct {
	h     slog.Handler
	attrs []slog.Attr
}

func (c *zapToSlog) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c *zapToSlog) With(fs []zapcore.Field) zapcore.Core {
	return &zapToSlog{h: c.h, attrs: append(slices.Clip(c.attrs), fieldAttrs(fs)...)}
}

func (c *zapToSlog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *zapToSlog) Write(e zapcore.Entry, fs []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(c.attrs...)
	r.AddAttrs(fieldAttrs(fs)...)
	return c.h.Handle(context.Background(), r)
}

func (c *zapToSlog) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func fieldAttrs(fs []zapcore.Field) []slog.Attr {
	if len(fs) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	return out
}
