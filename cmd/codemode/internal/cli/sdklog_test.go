package cli

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestMCPLogsSDKAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level   string
		sdkSeen bool
	}{
		{"info", false},
		{"debug", true},
	} {
		t.Run(tc.level, func(t *testing.T) {
			cs, stderr, exit := startStdio(t, context.Background(), "--log-level", tc.level)
			callExecute(t, cs, `return 1`)
			_ = cs.Close()
			select {
			case <-exit:
			case <-time.After(10 * time.Second):
				t.Fatal("the server did not stop at the end of its input")
			}
			logs := stderr.String()
			// The SDK's per-session record, and the server's own per run.
			if got := strings.Contains(logs, `msg="server session connected"`); got != tc.sdkSeen {
				t.Errorf("SDK session record present: got %v, want %v\n%s", got, tc.sdkSeen, logs)
			}
			if tc.sdkSeen && !strings.Contains(logs, `level=DEBUG msg="server session connected"`) {
				t.Errorf("the SDK's record is not at debug:\n%s", logs)
			}
			if !strings.Contains(logs, "level=INFO msg=execute") {
				t.Errorf("the server's own record is missing:\n%s", logs)
			}
		})
	}
}
