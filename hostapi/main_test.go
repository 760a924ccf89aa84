package hostapi_test

import (
	"log/slog"
	"os"
	"testing"
)

// TestMain keeps node logs to warnings and errors: the hosts these tests
// start log every room they recover and finish at info level.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}
