package console

import "github.com/codemode-go/codemode"

// callLine is the program line a held call was made on, 0 when unknown.
func callLine(pc codemode.PendingCall) int {
	if pc.Location == nil {
		return 0
	}
	return pc.Location.Line
}

// startOf is when a call started, in ms from the run's start.
func startOf(c codemode.ToolCall) int64 { return c.StartMs }
