package hostapi_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/hostapi"
)

// TestREADMEErrorTable keeps the README's error table equal to the one
// table in code (DECISIONS 4).
func TestREADMEErrorTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (\\d{3}) \\|$").FindAllStringSubmatch(string(b), -1)
	got := map[adp.Code]int{}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[2])
		got[adp.Code(r[1])] = n
	}
	want := hostapi.ErrorCodes()
	for c, s := range want {
		if got[c] != s {
			t.Errorf("README lists %s as %d; code says %d", c, got[c], s)
		}
	}
	for c := range got {
		if _, ok := want[c]; !ok {
			t.Errorf("README lists %s, which the code does not have", c)
		}
	}
}
