package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestQuickBench runs the benchmark in its quick form: every measurement
// must complete and the table must list them all (numbers are not
// asserted).
func TestQuickBench(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every benchmark once")
	}
	rep, err := Run(context.Background(), Options{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.Write(&b)
	t.Log("\n" + b.String())
	for _, w := range workloads {
		if !strings.Contains(b.String(), w.title) {
			t.Errorf("report lacks %q", w.title)
		}
	}
}
