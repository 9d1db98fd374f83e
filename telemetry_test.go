package codemode

import (
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// otelSink collects what a Runtime reports through the OpenTelemetry SDK.
type otelSink struct {
	tp     *sdktrace.TracerProvider
	spans  *tracetest.InMemoryExporter
	open   *openSpans
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newOtelSink(t testing.TB) *otelSink {
	s := &otelSink{spans: tracetest.NewInMemoryExporter(), open: &openSpans{}, reader: sdkmetric.NewManualReader()}
	// A syncer exports each span as it ends, so the exporter holds every
	// ended span the moment Execute returns.
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.open), sdktrace.WithSyncer(s.spans))
	s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	t.Cleanup(func() {
		_ = s.tp.Shutdown(context.Background())
		_ = s.mp.Shutdown(context.Background())
	})
	return s
}

// openSpans counts the spans started and not yet ended.
type openSpans struct{ n atomic.Int64 }

func (o *openSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) { o.n.Add(1) }
func (o *openSpans) OnEnd(sdktrace.ReadOnlySpan)                     { o.n.Add(-1) }
func (o *openSpans) Shutdown(context.Context) error                  { return nil }
func (o *openSpans) ForceFlush(context.Context) error                { return nil }

// named returns the ended spans called name.
func (s *otelSink) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, sp := range s.spans.GetSpans() {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// attrs maps a span's attributes to their values as strings.
func attrs(sp tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range sp.Attributes {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// secret is in every program, input, output and message of the tests, so
// finding it anywhere in a span shows that data leaked.
const secret = "s3cr3t"

func telemetryTools() Tools {
	return Tools{"t": Tools{
		"ok": Tool{Run: func(ctx context.Context, in json.RawMessage) (any, error) {
			// The tool's own instrumentation, as an HTTP client's would be.
			_, sp := trace.SpanFromContext(ctx).TracerProvider().Tracer("test").Start(ctx, "inner")
			sp.End()
			return map[string]string{"echo": secret + "-output"}, nil
		}},
		"fail": Tool{Run: func(context.Context, json.RawMessage) (any, error) {
			return nil, ToolError("no luck with " + secret)
		}},
	}}
}

const twoCalls = `// ` + secret + `
const a = await tools.t.ok({ q: "` + secret + `-input" })
try { await tools.t.fail({}) } catch (e) {}
return a`

func TestTelemetrySpans(t *testing.T) {
	for _, tc := range []struct {
		name string
		data bool
	}{
		{"no data by default", false},
		{"TraceData", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newOtelSink(t)
			var hookSpans sync.Map // index -> span ID the start hook saw
			rt := mustNew(t, Options{
				Tools: telemetryTools(), TracerProvider: sink.tp, TraceData: tc.data,
				OnToolCallStart: func(ctx context.Context, s Call) {
					hookSpans.Store(s.Index, trace.SpanFromContext(ctx).SpanContext().SpanID())
				},
			})
			ctx, parent := sink.tp.Tracer("test").Start(context.Background(), "caller")
			res, err := rt.Execute(ctx, twoCalls)
			if open := sink.open.n.Load(); open != 1 { // the caller's own
				t.Errorf("spans open after Execute returned: got %d, want 1 (the caller's)", open-1)
			}
			parent.End()
			if err != nil || !res.OK {
				t.Fatalf("run: %v %s", err, resultJSON(res))
			}

			runs := sink.named(spanExecute)
			if len(runs) != 1 {
				t.Fatalf("got %d run spans, want 1", len(runs))
			}
			run := runs[0]
			if run.Parent.SpanID() != parent.SpanContext().SpanID() || run.SpanKind != trace.SpanKindInternal {
				t.Errorf("run span: parent %v kind %v, want the caller's span and internal", run.Parent.SpanID(), run.SpanKind)
			}
			want := map[string]string{
				"codemode.ok": "true", "codemode.tool_call.count": "2", "codemode.truncated": "false",
				"codemode.code.size": strconv.Itoa(len(twoCalls)),
			}
			if tc.data {
				want["codemode.code"] = twoCalls
				want["codemode.value"] = `{"echo":"` + secret + `-output"}`
			}
			if got := attrs(run); !maps.Equal(got, want) {
				t.Errorf("run span attributes:\ngot  %v\nwant %v", got, want)
			}
			if run.Status.Code != codes.Unset {
				t.Errorf("run span status: got %v, want unset", run.Status)
			}

			calls := sink.named(spanToolCall)
			if len(calls) != 2 {
				t.Fatalf("got %d tool call spans, want 2", len(calls))
			}
			for _, c := range calls {
				if c.Parent.SpanID() != run.SpanContext.SpanID() || c.SpanContext.TraceID() != run.SpanContext.TraceID() {
					t.Errorf("%s: parent %v, want the run span %v", c.Name, c.Parent.SpanID(), run.SpanContext.SpanID())
				}
				got := attrs(c)
				idx := got["codemode.tool_call.index"]
				n, _ := strconv.Atoi(idx)
				if seen, _ := hookSpans.Load(n); seen != c.SpanContext.SpanID() {
					t.Errorf("call %s: the start hook saw span %v, want the call's %v", idx, seen, c.SpanContext.SpanID())
				}
				if got["codemode.tool_call.duration"] == "" {
					t.Errorf("call %s: no duration attribute", idx)
				}
				delete(got, "codemode.tool_call.duration") // a measurement
				var want map[string]string
				var status sdktrace.Status
				switch idx {
				case "0":
					want = map[string]string{"codemode.tool.name": "t.ok", "codemode.tool_call.index": "0", "codemode.tool_call.outcome": "ok"}
					if tc.data {
						want["codemode.tool_call.input"] = `{"q":"` + secret + `-input"}`
						want["codemode.tool_call.output"] = `{"echo":"` + secret + `-output"}`
					}
				case "1":
					want = map[string]string{"codemode.tool.name": "t.fail", "codemode.tool_call.index": "1", "codemode.tool_call.outcome": "error"}
					status = sdktrace.Status{Code: codes.Error, Description: "error"}
					if tc.data {
						want["codemode.tool_call.input"] = `{}`
						status.Description = "no luck with " + secret
					}
				}
				if !maps.Equal(got, want) {
					t.Errorf("call %s attributes:\ngot  %v\nwant %v", idx, got, want)
				}
				if c.Status != status {
					t.Errorf("call %s status: got %+v, want %+v", idx, c.Status, status)
				}
			}

			inner := sink.named("inner")
			if len(inner) != 1 || inner[0].Parent.SpanID() != callSpan(calls, "0").SpanID() {
				var parents []trace.SpanID
				for _, sp := range inner {
					parents = append(parents, sp.Parent.SpanID())
				}
				t.Errorf("the tool's own span: got parents %v, want [%v] (its call span)", parents, callSpan(calls, "0").SpanID())
			}
			if !tc.data {
				for _, sp := range sink.spans.GetSpans() {
					if leaked := spanText(sp); strings.Contains(leaked, secret) {
						t.Errorf("span %s carries data without TraceData: %s", sp.Name, leaked)
					}
				}
			}
		})
	}
}

// callSpan returns the span context of the call with index idx.
func callSpan(calls []tracetest.SpanStub, idx string) trace.SpanContext {
	for _, c := range calls {
		if attrs(c)["codemode.tool_call.index"] == idx {
			return c.SpanContext
		}
	}
	return trace.SpanContext{}
}

// spanText is every string a span carries to a backend.
func spanText(sp tracetest.SpanStub) string {
	var b strings.Builder
	b.WriteString(sp.Name + " " + sp.Status.Description)
	for _, kv := range sp.Attributes {
		b.WriteString(" " + kv.Value.String())
	}
	for _, ev := range sp.Events {
		b.WriteString(" " + ev.Name)
		for _, kv := range ev.Attributes {
			b.WriteString(" " + kv.Value.String())
		}
	}
	return b.String()
}

func TestTelemetryInterruptedRun(t *testing.T) {
	// The tool ignores its context, so only the run's end can end its
	// call: the call's span must end as cancelled before Execute returns.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := Tool{Run: func(context.Context, json.RawMessage) (any, error) {
		<-release
		return 1, nil
	}}
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool // the caller cancels once the call started
		want    map[string]string
		status  string
		err     bool
	}{
		{"timeout", 50 * time.Millisecond, false,
			map[string]string{"codemode.ok": "false", "codemode.diagnostic.kind": "TimeoutExceeded"}, "TimeoutExceeded", false},
		{"cancelled by the caller", 0, true,
			map[string]string{"codemode.ok": "false", "codemode.interrupted": "true"}, context.Canceled.Error(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newOtelSink(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := Options{Tools: Tools{"t": Tools{"hang": hang}}, TracerProvider: sink.tp, MeterProvider: sink.mp, Timeout: tc.timeout}
			if tc.cancel {
				opts.OnToolCallStart = func(context.Context, Call) { cancel() }
			}
			rt := mustNew(t, opts)
			res, err := rt.Execute(ctx, `await tools.t.hang({}); return 1`)
			if open := sink.open.n.Load(); open != 0 {
				t.Errorf("%d spans open after Execute returned", open)
			}
			if (err != nil) != tc.err {
				t.Fatalf("Execute error: got %v, want error %v", err, tc.err)
			}
			runs, calls := sink.named(spanExecute), sink.named(spanToolCall)
			if len(runs) != 1 || len(calls) != 1 {
				t.Fatalf("got %d run and %d call spans, want 1 and 1", len(runs), len(calls))
			}
			got := attrs(runs[0])
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("run span %s: got %q, want %q", k, got[k], v)
				}
			}
			if st := runs[0].Status; st.Code != codes.Error || st.Description != tc.status {
				t.Errorf("run span status: got %+v, want error %q", st, tc.status)
			}
			if got := attrs(calls[0])["codemode.tool_call.outcome"]; got != string(OutcomeCancelled) || res.ToolCalls[0].Outcome != OutcomeCancelled {
				t.Errorf("call span outcome: got %q, want cancelled", got)
			}
			if st := calls[0].Status; st.Code != codes.Unset {
				t.Errorf("a cancelled call is not a tool failure: got status %+v", st)
			}
			if n := gauge(t, sink, "codemode.runs.active"); n != 0 {
				t.Errorf("codemode.runs.active after the run: got %d, want 0", n)
			}
		})
	}
}

func TestTelemetryMetrics(t *testing.T) {
	sink := newOtelSink(t)
	var active atomic.Int64
	tools := telemetryTools()
	tools["probe"] = Tools{"active": Tool{Run: func(context.Context, json.RawMessage) (any, error) {
		active.Store(gauge(t, sink, "codemode.runs.active"))
		return nil, nil
	}}}
	rt := mustNew(t, Options{Tools: tools, MeterProvider: sink.mp})
	for _, code := range []string{
		twoCalls,
		twoCalls,
		`await tools.probe.active({}); throw new Error("no")`,
		`return (`,
	} {
		if _, err := rt.Execute(context.Background(), code); err != nil {
			t.Fatal(err)
		}
	}
	if n := active.Load(); n != 1 {
		t.Errorf("codemode.runs.active during a run: got %d, want 1", n)
	}
	for _, tc := range []struct {
		metric string
		want   map[string]int64
	}{
		{"codemode.runs", map[string]int64{
			"codemode.ok=true": 2,
			"codemode.diagnostic.kind=ExecutionFailure,codemode.ok=false": 1,
			"codemode.diagnostic.kind=ParseError,codemode.ok=false":       1,
		}},
		{"codemode.run.duration", map[string]int64{ // counts of observations
			"codemode.ok=true": 2,
			"codemode.diagnostic.kind=ExecutionFailure,codemode.ok=false": 1,
			"codemode.diagnostic.kind=ParseError,codemode.ok=false":       1,
		}},
		{"codemode.tool_calls", map[string]int64{
			"codemode.tool.name=t.ok,codemode.tool_call.outcome=ok":         2,
			"codemode.tool.name=t.fail,codemode.tool_call.outcome=error":    2,
			"codemode.tool.name=probe.active,codemode.tool_call.outcome=ok": 1,
		}},
		{"codemode.tool_call.duration", map[string]int64{
			"codemode.tool.name=t.ok,codemode.tool_call.outcome=ok":         2,
			"codemode.tool.name=t.fail,codemode.tool_call.outcome=error":    2,
			"codemode.tool.name=probe.active,codemode.tool_call.outcome=ok": 1,
		}},
		{"codemode.runs.active", map[string]int64{"": 0}},
	} {
		t.Run(tc.metric, func(t *testing.T) {
			if got := points(t, sink, tc.metric); !maps.Equal(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

// points collects a metric: each data point's value (a histogram's
// count) by its encoded attribute set.
func points(t testing.TB, sink *otelSink, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := sink.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != instrumentationName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, instrumentationName)
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[p.Attributes.Encoded(attribute.DefaultEncoder())] = int64(p.Count)
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return out
}

// gauge is the value of an attribute-less sum.
func gauge(t testing.TB, sink *otelSink, name string) int64 {
	t.Helper()
	return points(t, sink, name)[""]
}

func TestTelemetryOff(t *testing.T) {
	for _, tc := range []struct {
		name          string
		traces, meter bool
	}{
		{"no providers", false, false},
		{"traces only", true, false},
		{"metrics only", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The caller traces with its own provider in every case; the
			// runtime records only through the providers it was given.
			caller := newOtelSink(t)
			mine := newOtelSink(t)
			opts := Options{Tools: telemetryTools()}
			if tc.traces {
				opts.TracerProvider = mine.tp
			}
			if tc.meter {
				opts.MeterProvider = mine.mp
			}
			rt := mustNew(t, opts)
			if (rt.tel == nil) != (!tc.traces && !tc.meter) {
				t.Errorf("telemetry: got %v, want it only with a provider", rt.tel)
			}
			ctx, parent := caller.tp.Tracer("test").Start(context.Background(), "caller")
			if _, err := rt.Execute(ctx, twoCalls); err != nil {
				t.Fatal(err)
			}
			parent.End()
			// The tool's "inner" span nests under whatever span its ctx
			// carries, so it lands in the caller's provider unless the
			// runtime made a call span of its own.
			if got, want := len(caller.named(spanExecute)), 0; got != want {
				t.Errorf("run spans in the caller's provider: got %d, want %d", got, want)
			}
			wantSpans := 0
			if tc.traces {
				wantSpans = 3 // run, call, call
			}
			if got := len(mine.named(spanExecute)) + len(mine.named(spanToolCall)); got != wantSpans {
				t.Errorf("spans recorded: got %d, want %d", got, wantSpans)
			}
			innerAt := caller
			if tc.traces {
				innerAt = mine
			}
			if got := len(innerAt.named("inner")); got != 1 {
				t.Errorf("the tool's span is not under the span its ctx should carry: got %d, want 1", got)
			}
			wantRuns := map[string]int64{}
			if tc.meter {
				wantRuns["codemode.ok=true"] = 1
			}
			if got := points(t, mine, "codemode.runs"); !maps.Equal(got, wantRuns) {
				t.Errorf("codemode.runs: got %v, want %v", got, wantRuns)
			}
		})
	}
}

// BenchmarkToolCallTelemetry is BenchmarkToolCall without providers and
// with the SDK's (spans batched to a discarding exporter, metrics
// aggregated), so one run shows what instrumentation costs per call.
func BenchmarkToolCallTelemetry(b *testing.B) {
	noop := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(`{"ok":true}`), nil }}
	for _, bc := range []struct {
		name string
		on   bool
	}{{"off", false}, {"on", true}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := Options{Tools: Tools{"ns": Tools{"noop": noop}}}
			if bc.on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}))
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() {
					_ = tp.Shutdown(context.Background())
					_ = mp.Shutdown(context.Background())
				})
				opts.TracerProvider, opts.MeterProvider = tp, mp
			}
			rt := benchRuntime(b, opts)
			const calls = 1000
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchExecute(b, rt, `for (let i = 0; i < 1000; i++) await tools.ns.noop({ i }); return 1`)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
		})
	}
}

type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// TestTelemetryDataCapped: with TraceData, a program near its size limit
// and a megabyte of input, output, value or failure message each reach a span as at most
// MaxTraceDataBytes of it, cut between characters, and a note saying how
// long it was; short data is kept whole.
func TestTelemetryDataCapped(t *testing.T) {
	const mib = 1 << 20
	// "€" is three bytes, so a cut at a round number of bytes falls
	// inside one unless it is moved back.
	big := strings.Repeat("€", mib/3+1)
	sink := newOtelSink(t)
	rt := mustNew(t, Options{
		TracerProvider: sink.tp, TraceData: true,
		Tools: Tools{"t": Tools{
			"echo": Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }},
			"fail": Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, ToolError(big) }},
			"tiny": Tool{Run: func(context.Context, json.RawMessage) (any, error) { return "ok", nil }},
		}},
	})
	// The program is the largest Execute takes; the rest are a megabyte.
	ok := "// " + strings.Repeat("€", 300_000) + "\n" + `
		const s = "€".repeat(` + strconv.Itoa(mib/3+1) + `)
		await tools.t.tiny({ q: 1 })
		try { await tools.t.fail({}) } catch (e) {}
		return await tools.t.echo({ s })`
	if res, err := rt.Execute(context.Background(), ok); err != nil || !res.OK {
		t.Fatalf("run: %v %.300s", err, resultJSON(res))
	}
	thrown := `throw new Error("€".repeat(` + strconv.Itoa(mib/3+1) + `))`
	if res, err := rt.Execute(context.Background(), thrown); err != nil || res.OK {
		t.Fatalf("run: got %v %.300s, want a failed result", err, resultJSON(res))
	}

	marker := regexp.MustCompile(`… \[truncated: (\d+) bytes\]$`)
	// check returns how long the value says it was, or -1 when it is
	// whole.
	check := func(what, v string) int {
		t.Helper()
		if !utf8.ValidString(v) {
			t.Errorf("%s: not valid UTF-8 (cut inside a character)", what)
		}
		m := marker.FindStringSubmatch(v)
		if m == nil {
			if len(v) > MaxTraceDataBytes {
				t.Errorf("%s: got %d bytes and no truncation note, want at most %d", what, len(v), MaxTraceDataBytes)
			}
			return -1
		}
		if kept := len(v) - len(m[0]); kept > MaxTraceDataBytes || kept < MaxTraceDataBytes-utf8.UTFMax {
			t.Errorf("%s: kept %d bytes, want %d less at most a character", what, kept, MaxTraceDataBytes)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}

	runs := sink.named(spanExecute)
	if len(runs) != 2 {
		t.Fatalf("got %d run spans, want 2", len(runs))
	}
	if got := check("the program", attrs(runs[0])["codemode.code"]); got != len(ok) {
		t.Errorf("the program: got a note of %d bytes, want %d", got, len(ok))
	}
	if got := check("the value", attrs(runs[0])["codemode.value"]); got < mib {
		t.Errorf("the value: got a note of %d bytes, want at least %d", got, mib)
	}
	if got := check("the thrown message", runs[1].Status.Description); got < mib {
		t.Errorf("the thrown message: got a note of %d bytes, want at least %d", got, mib)
	}
	calls := map[string]tracetest.SpanStub{}
	for _, c := range sink.named(spanToolCall) {
		calls[attrs(c)["codemode.tool.name"]] = c
	}
	if got := check("the echo input", attrs(calls["t.echo"])["codemode.tool_call.input"]); got < mib {
		t.Errorf("the echo input: got a note of %d bytes, want at least %d", got, mib)
	}
	if got := check("the echo output", attrs(calls["t.echo"])["codemode.tool_call.output"]); got < mib {
		t.Errorf("the echo output: got a note of %d bytes, want at least %d", got, mib)
	}
	if got := check("the tool's message", calls["t.fail"].Status.Description); got < mib {
		t.Errorf("the tool's message: got a note of %d bytes, want at least %d", got, mib)
	}
	tiny := attrs(calls["t.tiny"])
	if tiny["codemode.tool_call.input"] != `{"q":1}` || tiny["codemode.tool_call.output"] != `"ok"` {
		t.Errorf("short data: got input %q output %q, want them whole", tiny["codemode.tool_call.input"], tiny["codemode.tool_call.output"])
	}
	// Nothing on any span is longer than the cap and its note.
	for _, sp := range sink.spans.GetSpans() {
		check(sp.Name+" status", sp.Status.Description)
		for _, kv := range sp.Attributes {
			check(sp.Name+" "+string(kv.Key), kv.Value.String())
		}
	}
}

// TestTraceDataCut: the cut keeps whole characters, whatever their size
// and wherever the cap falls among them.
func TestTraceDataCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
	}{
		{"ascii", strings.Repeat("a", MaxTraceDataBytes+1)},
		{"two-byte", strings.Repeat("é", MaxTraceDataBytes)},
		{"three-byte", strings.Repeat("€", MaxTraceDataBytes)},
		{"four-byte", strings.Repeat("😀", MaxTraceDataBytes)},
		{"offset four-byte", "ab" + strings.Repeat("😀", MaxTraceDataBytes)},
		{"exactly the cap", strings.Repeat("a", MaxTraceDataBytes)},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := traceData(tc.s)
			if len(tc.s) <= MaxTraceDataBytes {
				if got != tc.s {
					t.Errorf("got %d bytes, want the %d kept whole", len(got), len(tc.s))
				}
				return
			}
			kept, note, ok := strings.Cut(got, "… [truncated: ")
			if !ok || note != strconv.Itoa(len(tc.s))+" bytes]" {
				t.Fatalf("got a note %q, want … [truncated: %d bytes]", note, len(tc.s))
			}
			if !utf8.ValidString(kept) || !strings.HasPrefix(tc.s, kept) || len(kept) > MaxTraceDataBytes || len(kept) <= MaxTraceDataBytes-utf8.UTFMax {
				t.Errorf("got %d bytes kept (valid UTF-8 %v), want a prefix of whole characters within %d bytes of the cap", len(kept), utf8.ValidString(kept), utf8.UTFMax)
			}
		})
	}
}
