package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names the tracer and the meter: the package, as
// OpenTelemetry asks of instrumentation libraries.
const instrumentationName = "github.com/codemode-go/codemode"

// The span names.
const (
	spanExecute  = "codemode.execute"
	spanToolCall = "codemode.tool_call"
)

// The attributes of spans and metrics. Those marked data are set only
// with Options.TraceData, and each is cut at MaxTraceDataBytes.
const (
	attrOK          = attribute.Key("codemode.ok")
	attrKind        = attribute.Key("codemode.diagnostic.kind") // failed runs only
	attrInterrupted = attribute.Key("codemode.interrupted")     // interrupted runs only
	attrSuspended   = attribute.Key("codemode.suspended")       // suspended steps only
	attrCallCount   = attribute.Key("codemode.tool_call.count")
	attrTruncated   = attribute.Key("codemode.truncated")
	attrCodeSize    = attribute.Key("codemode.code.size") // bytes
	attrCode        = attribute.Key("codemode.code")      // data
	attrValue       = attribute.Key("codemode.value")     // data: the result's JSON

	attrToolName     = attribute.Key("codemode.tool.name")
	attrCallIndex    = attribute.Key("codemode.tool_call.index")
	attrCallOutcome  = attribute.Key("codemode.tool_call.outcome")
	attrCallDuration = attribute.Key("codemode.tool_call.duration") // seconds
	attrCallInput    = attribute.Key("codemode.tool_call.input")    // data
	attrCallOutput   = attribute.Key("codemode.tool_call.output")   // data
)

// durationBuckets are the histograms' bounds in seconds: from an
// in-memory tool's call to a run at the untrusted preset's 30 s limit.
// The SDK's default bounds are meant for milliseconds.
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// telemetry is a Runtime's instrumentation. A Runtime without providers
// has none (nil), so an uninstrumented run pays a nil check per point.
type telemetry struct {
	tracer trace.Tracer // nil: no spans
	data   bool         // Options.TraceData
	m      *instruments // nil: no metrics
}

type instruments struct {
	runs         metric.Int64Counter
	runDuration  metric.Float64Histogram
	active       metric.Int64UpDownCounter
	calls        metric.Int64Counter
	callDuration metric.Float64Histogram
}

func newTelemetry(o *Options) (*telemetry, error) {
	if o.TracerProvider == nil && o.MeterProvider == nil {
		return nil, nil
	}
	t := &telemetry{data: o.TraceData}
	if o.TracerProvider != nil {
		t.tracer = o.TracerProvider.Tracer(instrumentationName)
	}
	if o.MeterProvider != nil {
		meter := o.MeterProvider.Meter(instrumentationName)
		m := &instruments{}
		var errs [5]error
		m.runs, errs[0] = meter.Int64Counter("codemode.runs", metric.WithUnit("{run}"),
			metric.WithDescription("Runs that ended, by codemode.ok and codemode.diagnostic.kind."))
		m.runDuration, errs[1] = meter.Float64Histogram("codemode.run.duration", metric.WithUnit("s"),
			metric.WithDescription("How long runs took, from Execute to its return."),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		m.active, errs[2] = meter.Int64UpDownCounter("codemode.runs.active", metric.WithUnit("{run}"),
			metric.WithDescription("Runs in flight: at most one engine instance each."))
		m.calls, errs[3] = meter.Int64Counter("codemode.tool_calls", metric.WithUnit("{call}"),
			metric.WithDescription("Tool calls that started, by codemode.tool.name and codemode.tool_call.outcome."))
		m.callDuration, errs[4] = meter.Float64Histogram("codemode.tool_call.duration", metric.WithUnit("s"),
			metric.WithDescription("How long tool calls ran, until their end was reported."),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		if err := errors.Join(errs[:]...); err != nil {
			return nil, err
		}
		t.m = m
	}
	return t, nil
}

// runTelemetry is one run's span and measurements.
type runTelemetry struct {
	t     *telemetry
	ctx   context.Context // carries the span
	span  trace.Span      // nil without a tracer
	start time.Time
}

// startRun begins a run's span; ctx is Execute's, and the returned one
// carries the span to the run's tool calls.
func (t *telemetry) startRun(ctx context.Context, code string) (context.Context, *runTelemetry) {
	r := &runTelemetry{t: t, start: time.Now()}
	if t.tracer != nil {
		attrs := []attribute.KeyValue{attrCodeSize.Int(len(code))}
		if t.data {
			attrs = append(attrs, attrCode.String(traceData(code)))
		}
		ctx, r.span = t.tracer.Start(ctx, spanExecute, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	}
	if t.m != nil {
		t.m.active.Add(ctx, 1)
	}
	r.ctx = ctx
	return ctx, r
}

// endStep records what a run (or a step of a suspendable run) returns,
// with codemode.suspended when it suspended (its span and its count in
// codemode.runs then stand for one step, not a whole run). Without
// TraceData the span's status names the diagnostic's kind but not its
// message, which may quote anything the program threw.
func (r *runTelemetry) endStep(res Result, suspended bool, err error) {
	outcome := []attribute.KeyValue{attrOK.Bool(res.OK)}
	switch {
	case suspended:
		outcome = append(outcome, attrSuspended.Bool(true))
	case err != nil:
		outcome = append(outcome, attrInterrupted.Bool(true))
	case res.Error != nil:
		outcome = append(outcome, attrKind.String(string(res.Error.Kind)))
	}
	if m := r.t.m; m != nil {
		set := metric.WithAttributeSet(attribute.NewSet(outcome...))
		m.active.Add(r.ctx, -1)
		m.runs.Add(r.ctx, 1, set)
		m.runDuration.Record(r.ctx, time.Since(r.start).Seconds(), set)
	}
	s := r.span
	if s == nil {
		return
	}
	s.SetAttributes(outcome...)
	s.SetAttributes(attrCallCount.Int(len(res.ToolCalls)), attrTruncated.Bool(res.Truncated))
	if r.t.data && res.OK {
		s.SetAttributes(attrValue.String(traceData(res.Value)))
	}
	switch {
	case err != nil:
		// Interruptions are the host's own errors (ctx.Err(), ErrStopped).
		s.SetStatus(codes.Error, traceData(err.Error()))
	case res.Error != nil:
		desc := string(res.Error.Kind)
		if r.t.data {
			desc = traceData(res.Error.Error())
		}
		s.SetStatus(codes.Error, desc)
	}
	s.End()
}

// startCall begins a tool call's span under the run's; the returned ctx
// is what the tool and the hooks receive.
func (t *telemetry) startCall(ctx context.Context, s Call) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{attrToolName.String(s.Name), attrCallIndex.Int(s.Index)}
	if t.data {
		attrs = append(attrs, attrCallInput.String(traceData(s.Input)))
	}
	return t.tracer.Start(ctx, spanToolCall, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endCall records a call's reported end; out is the tool's output when
// it succeeded.
func (t *telemetry) endCall(ctx context.Context, span trace.Span, e CallEnd, out json.RawMessage) {
	if m := t.m; m != nil {
		set := metric.WithAttributeSet(attribute.NewSet(attrToolName.String(e.Name), attrCallOutcome.String(string(e.Outcome))))
		m.calls.Add(ctx, 1, set)
		m.callDuration.Record(ctx, e.Duration.Seconds(), set)
	}
	if span == nil {
		return
	}
	span.SetAttributes(attrCallOutcome.String(string(e.Outcome)), attrCallDuration.Float64(e.Duration.Seconds()))
	if t.data && out != nil {
		span.SetAttributes(attrCallOutput.String(traceData(out)))
	}
	// A cancelled call is not a tool failure: the run ended, or the
	// program stopped waiting for it (a lost Promise.race). The run's
	// span says why a run ended.
	if e.Outcome == OutcomeError || e.Outcome == OutcomeInvalidOutput {
		desc := string(e.Outcome)
		if t.data {
			desc = traceData(e.Message)
		}
		span.SetStatus(codes.Error, desc)
	}
	span.End()
}

// MaxTraceDataBytes bounds each value Options.TraceData puts on a span:
// the program text, the result's value, each call's input and output, and
// each failure message a span's status carries. A longer one keeps its
// first MaxTraceDataBytes bytes, cut back to a whole character, and ends
// "… [truncated: N bytes]" with its full length. A span is exported whole
// and kept by a backend that bills or drops by size; a megabyte argument
// must not become a megabyte span, and the first few kilobytes are what a
// person reading a trace looks at.
const MaxTraceDataBytes = 4 << 10

// traceData is s as a span may carry it: whole when it is within
// MaxTraceDataBytes, else cut as MaxTraceDataBytes describes. Only the
// kept part is copied, so a large value costs no more than a small one.
func traceData[T ~string | ~[]byte](s T) string {
	if len(s) <= MaxTraceDataBytes {
		return string(s)
	}
	cut := MaxTraceDataBytes
	// Back to the start of the character the cap falls in (at most
	// UTFMax-1 bytes: further back, the text was not UTF-8 anyway).
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return string(s[:cut]) + "… [truncated: " + strconv.Itoa(len(s)) + " bytes]"
}
