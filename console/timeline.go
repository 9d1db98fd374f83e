package console

import (
	"fmt"

	"github.com/codemode-go/codemode"
)

// timeline is a run's tool calls drawn on a time line: one row per call,
// a bar from its start for its duration, so calls made at once are bars
// side by side.
type timeline struct {
	Width, Height int
	Span          int64 // ms the axis covers
	Rows          []bar
	Ticks         []tick
	Omitted       int
}

type bar struct {
	Index          int
	Name           string
	Outcome        string
	StartMs, Ms    int64
	X, Y, W, TextX int
	Label          string
	Concurrent     int // calls under way when it started, itself included
}

type tick struct {
	X     int
	Label string
}

// Geometry of the time line, in SVG user units.
const (
	tlLabel = 260 // the names' column
	tlPlot  = 640 // the bars' width
	tlRow   = 22
	tlTop   = 24
	tlRows  = 300 // most calls drawn
)

func newTimeline(calls []codemode.ToolCall) *timeline {
	if len(calls) == 0 {
		return nil
	}
	t := &timeline{Width: tlLabel + tlPlot + 120} // room for the last label
	shown := calls
	if len(shown) > tlRows {
		t.Omitted = len(shown) - tlRows
		shown = shown[:tlRows]
	}
	for _, c := range shown {
		t.Span = max(t.Span, startOf(c)+c.DurationMs)
	}
	t.Span = max(t.Span, 1)
	scale := float64(tlPlot) / float64(t.Span)
	for i, c := range shown {
		s := startOf(c)
		b := bar{Index: i, Name: c.Name, Outcome: string(c.Outcome), StartMs: s, Ms: c.DurationMs,
			X: tlLabel + int(float64(s)*scale), Y: tlTop + i*tlRow, W: max(int(float64(c.DurationMs)*scale), 2)}
		for _, o := range shown {
			if startOf(o) <= s && s < startOf(o)+max(o.DurationMs, 1) {
				b.Concurrent++
			}
		}
		b.TextX = b.X + b.W + 4
		b.Label = fmt.Sprintf("%s · %d ms", b.Outcome, b.Ms)
		t.Rows = append(t.Rows, b)
	}
	t.Height = tlTop + len(t.Rows)*tlRow + 8
	for i := 0; i <= 4; i++ {
		ms := t.Span * int64(i) / 4
		t.Ticks = append(t.Ticks, tick{X: tlLabel + int(float64(ms)*scale), Label: fmt.Sprintf("%d ms", ms)})
	}
	return t
}
