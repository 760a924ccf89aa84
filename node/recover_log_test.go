package node_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/node"
)

// The start-up line says how long recovery took with a unit ("2ms"), not
// as a bare count of nanoseconds; on a restart of the same dir as well.
func TestRecoveredRoomsLogHasUnits(t *testing.T) {
	dir := t.TempDir()
	for round := 0; round < 2; round++ {
		var buf bytes.Buffer
		n, err := node.Open(node.Config{PublicURL: "http://127.0.0.1:1", DataDir: dir,
			Log: slog.New(slog.NewJSONHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		n.Close()
		var line map[string]any
		for _, l := range strings.Split(buf.String(), "\n") {
			if strings.Contains(l, `"recovered rooms"`) {
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatal(err)
				}
			}
		}
		took, ok := line["took"].(string)
		if !ok {
			t.Fatalf("round %d: took is %T %v, want a duration string", round, line["took"], line["took"])
		}
		if d, err := time.ParseDuration(took); err != nil || d < 0 || d > time.Minute {
			t.Fatalf("round %d: took %q: %v", round, took, err)
		}
	}
}
