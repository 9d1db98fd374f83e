package otlp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode/cmd/codemode/internal/otlp/otlptest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func newCollector(t *testing.T) (*otlptest.Collector, *httptest.Server) {
	c := &otlptest.Collector{}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv
}

// someSpans records spans that use every field OTLP carries: attributes
// of each type, events, links, status, kinds, a remote parent, trace
// state, dropped counts and two scopes.
func someSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "codemode"), attribute.Int("pid", 42))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeCountLimit: 12, EventCountLimit: 2, LinkCountLimit: 1,
			AttributeValueLengthLimit: -1, AttributePerEventCountLimit: 1, AttributePerLinkCountLimit: 1}))
	a := tp.Tracer("codemode", trace.WithInstrumentationVersion("1.2.3"), trace.WithSchemaURL("https://example.com/s"),
		trace.WithInstrumentationAttributes(attribute.Bool("scoped", true)))
	b := tp.Tracer("other")

	ts, err := trace.ParseTraceState("vendor=a,other=b")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
	linked := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, SpanID: trace.SpanID{8, 8, 8, 8, 8, 8, 8, 8}, TraceState: ts,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	ctx, root := a.Start(ctx, "codemode.execute", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(time.Unix(1700000000, 5)),
		trace.WithLinks(trace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("why", "retry"), attribute.Int("n", 2)}},
			trace.Link{SpanContext: linked}),
		trace.WithAttributes(
			attribute.Bool("t", true), attribute.Bool("f", false), attribute.Int64("zero", 0), attribute.Int64("neg", -7),
			attribute.Float64("pi", 3.25), attribute.Float64("fzero", 0), attribute.String("empty", ""), attribute.String("s", "héllo"),
			attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, -1, 0}),
			attribute.Float64Slice("fs", []float64{0.5, 0}), attribute.StringSlice("ss", []string{"a", ""}),
			attribute.ByteSlice("bytes", []byte{0, 1, 255}), attribute.Slice("mixed", attribute.IntValue(1), attribute.StringValue("x")),
			attribute.Map("map", attribute.String("k", "v"), attribute.Int("i", 3)), attribute.String("over", "the limit"),
		))
	root.AddEvent("first", trace.WithAttributes(attribute.String("a", "1"), attribute.String("b", "2")), trace.WithTimestamp(time.Unix(1700000001, 0)))
	root.AddEvent("second")
	root.AddEvent("third")
	root.SetStatus(codes.Error, "the tool failed")

	_, call := a.Start(ctx, "codemode.tool_call", trace.WithSpanKind(trace.SpanKindClient))
	call.SetStatus(codes.Ok, "")
	call.End()
	_, other := b.Start(ctx, "other.thing", trace.WithSpanKind(trace.SpanKindConsumer))
	other.End(trace.WithTimestamp(time.Unix(1700000003, 0)))
	_, internal := a.Start(context.Background(), "internal", trace.WithSpanKind(trace.SpanKindInternal))
	internal.End()
	root.End(trace.WithTimestamp(time.Unix(1700000002, 0)))
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec.Ended()
}

// TestSpansMatchOfficial: the request this package writes decodes to
// the same message as the one the official exporter sends for the same
// spans.
func TestSpansMatchOfficial(t *testing.T) {
	spans := someSpans(t)
	c, srv := newCollector(t)
	ctx := context.Background()

	official, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	if err := official.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	want := c.Take()

	ours := NewTraceExporter(Config{URL: srv.URL + "/v1/traces"})
	if err := ours.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	got := c.Take()
	if len(want) != 1 || len(got) != 1 {
		t.Fatalf("got %d and %d requests, want 1 each", len(want), len(got))
	}
	if ct := got[0].Header.Get("Content-Type"); ct != "application/x-protobuf" {
		t.Errorf("Content-Type %q", ct)
	}
	var w, g coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(want[0].Body, &w); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(got[0].Body, &g); err != nil {
		t.Fatalf("our request does not decode: %v", err)
	}
	// The official exporter leaves a link's trace state out; this
	// package sends it. The rest must agree field for field.
	sawState := false
	for _, rs := range g.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				for _, l := range s.Links {
					sawState = sawState || l.TraceState != ""
					l.TraceState = ""
				}
			}
		}
	}
	if !sawState {
		t.Error("a link's trace state was not sent")
	}
	if !proto.Equal(&w, &g) {
		t.Errorf("the requests differ\nofficial: %s\nours:     %s", protojson.Format(&w), protojson.Format(&g))
	}
	if n := countSpans(&g); n != len(spans) {
		t.Errorf("%d spans sent, want %d", n, len(spans))
	}
}

func countSpans(r *coltracepb.ExportTraceServiceRequest) int {
	n := 0
	for _, rs := range r.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	return n
}

// someMetrics collects every instrument kind, an exponential histogram,
// exemplars, and a summary no SDK instrument makes.
func someMetrics(t *testing.T) *metricdata.ResourceMetrics {
	reader := sdkmetric.NewManualReader()
	res := resource.NewWithAttributes("", attribute.String("service.name", "codemode"))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res),
		sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "exp.*"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}})))
	m := mp.Meter("codemode", metric.WithInstrumentationVersion("1.0"), metric.WithSchemaURL("https://example.com/s"))
	ctx := context.Background()
	// A sampled span in the context gives the measurements exemplars.
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	sctx := trace.ContextWithSpanContext(ctx, sc)
	attrs := metric.WithAttributes(attribute.String("outcome", "ok"))

	ic, _ := m.Int64Counter("runs", metric.WithUnit("{run}"), metric.WithDescription("runs started"))
	ic.Add(sctx, 3, attrs)
	ic.Add(ctx, 0)
	fc, _ := m.Float64Counter("seconds")
	fc.Add(ctx, 1.5)
	ud, _ := m.Int64UpDownCounter("active")
	ud.Add(ctx, -2, attrs)
	h, _ := m.Float64Histogram("duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.1, 1, 10))
	h.Record(sctx, 0.05, attrs)
	h.Record(ctx, 3)
	ih, _ := m.Int64Histogram("sizes")
	ih.Record(ctx, 0)
	eh, _ := m.Float64Histogram("exp.duration")
	for _, v := range []float64{0, 0.001, 2, 2, 1e6, -0} {
		eh.Record(sctx, v)
	}
	eih, _ := m.Int64Histogram("exp.sizes")
	eih.Record(ctx, 100)
	g, _ := m.Float64Gauge("temperature")
	g.Record(ctx, -4.5)
	ig, _ := m.Int64Gauge("level")
	ig.Record(ctx, 0)
	_, _ = m.Int64ObservableCounter("observed", metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(10)
		return nil
	}))
	_, _ = m.Float64ObservableGauge("observed.gauge", metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
		o.Observe(0.25, attrs)
		return nil
	}))
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	rm.ScopeMetrics = append(rm.ScopeMetrics, metricdata.ScopeMetrics{
		Scope: instrumentation.Scope{Name: "summaries"},
		Metrics: []metricdata.Metrics{{Name: "latency", Data: metricdata.Summary{DataPoints: []metricdata.SummaryDataPoint{{
			Attributes: attribute.NewSet(attribute.String("q", "yes")), StartTime: time.Unix(1, 0), Time: time.Unix(2, 0),
			Count: 4, Sum: 9.5, QuantileValues: []metricdata.QuantileValue{{Quantile: 0, Value: 1}, {Quantile: 0.99, Value: 4}},
		}}}}},
	})
	return &rm
}

// TestMetricsMatchOfficial: as TestSpansMatchOfficial, for metrics.
func TestMetricsMatchOfficial(t *testing.T) {
	rm := someMetrics(t)
	c, srv := newCollector(t)
	ctx := context.Background()

	official, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(srv.URL+"/v1/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	if err := official.Export(ctx, rm); err != nil {
		t.Fatal(err)
	}
	want := c.Take()
	ours := NewMetricExporter(Config{URL: srv.URL + "/v1/metrics"})
	if err := ours.Export(ctx, rm); err != nil {
		t.Fatal(err)
	}
	got := c.Take()
	if len(want) != 1 || len(got) != 1 {
		t.Fatalf("got %d and %d requests, want 1 each", len(want), len(got))
	}
	var w, g colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(want[0].Body, &w); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(got[0].Body, &g); err != nil {
		t.Fatalf("our request does not decode: %v", err)
	}
	if !proto.Equal(&w, &g) {
		t.Errorf("the requests differ\nofficial: %s\nours:     %s", protojson.Format(&w), protojson.Format(&g))
	}
	for _, sm := range g.ResourceMetrics[0].ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Data == nil {
				t.Errorf("metric %s has no data", m.Name)
			}
		}
	}
	if n := len(g.ResourceMetrics[0].ScopeMetrics[0].Metrics); n != 11 {
		t.Errorf("%d metrics in the first scope, want 11", n)
	}
}

// TestUnknownAggregation: a metric OTLP cannot carry is named in the
// error, and the others are still sent.
func TestUnknownAggregation(t *testing.T) {
	c, srv := newCollector(t)
	rm := &metricdata.ResourceMetrics{Resource: resource.Empty(), ScopeMetrics: []metricdata.ScopeMetrics{{Metrics: []metricdata.Metrics{
		{Name: "odd", Data: metricdata.Sum[int64]{Temporality: metricdata.Temporality(9)}},
		{Name: "fine", Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Value: 1}}}},
	}}}}
	err := NewMetricExporter(Config{URL: srv.URL}).Export(context.Background(), rm)
	if err == nil || !strings.Contains(err.Error(), "odd") {
		t.Errorf("err = %v, want one naming the metric odd", err)
	}
	reqs := c.Take()
	var g colmetricpb.ExportMetricsServiceRequest
	if len(reqs) != 1 || proto.Unmarshal(reqs[0].Body, &g) != nil {
		t.Fatalf("%d requests", len(reqs))
	}
	if ms := g.ResourceMetrics[0].ScopeMetrics[0].Metrics; len(ms) != 1 || ms[0].Name != "fine" {
		t.Errorf("sent %v", ms)
	}
}

// TestInvalidUTF8: a string that is not UTF-8 — a tool name or an error
// text from the program — is repaired, so the collector can still decode
// the request. (The official exporter fails the whole batch over it.)
func TestInvalidUTF8(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, s := tp.Tracer("t").Start(context.Background(), "bad\xffname", trace.WithAttributes(
		attribute.String("k", "v\xc3"), attribute.StringSlice("ks", []string{"\xfe"})))
	s.SetStatus(codes.Error, "\xff")
	s.End()
	var r coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(encodeSpans(rec.Ended()), &r); err != nil {
		t.Fatalf("does not decode: %v", err)
	}
	sp := r.ResourceSpans[0].ScopeSpans[0].Spans[0]
	if sp.Name != "bad\uFFFDname" || sp.Attributes[0].Value.GetStringValue() != "v\uFFFD" || sp.Status.Message != "\uFFFD" {
		t.Errorf("got %q, %q, %q", sp.Name, sp.Attributes[0].Value.GetStringValue(), sp.Status.Message)
	}
}

func fastRetry(x interface{ client() *client }) {
	c := x.client()
	c.backoff, c.maxBackoff = time.Millisecond, 4*time.Millisecond
}

func (x *TraceExporter) client() *client  { return x.c }
func (x *MetricExporter) client() *client { return x.c }

// TestRetry: 429, 502, 503 and 504 are tried again; a refused
// connection too; 400 is not.
func TestRetry(t *testing.T) {
	spans := someSpans(t)
	ctx := context.Background()
	for _, code := range []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		c, srv := newCollector(t)
		c.SetAnswer(func(w http.ResponseWriter, n int) {
			if n < 3 {
				http.Error(w, "busy", code)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		x := NewTraceExporter(Config{URL: srv.URL})
		fastRetry(x)
		if err := x.ExportSpans(ctx, spans); err != nil {
			t.Errorf("%d: %v", code, err)
		}
		if reqs := c.Take(); len(reqs) != 3 {
			t.Errorf("%d: %d requests, want 3", code, len(reqs))
		}
	}

	c, srv := newCollector(t)
	c.SetAnswer(func(w http.ResponseWriter, _ int) { http.Error(w, "your request is malformed", http.StatusBadRequest) })
	x := NewTraceExporter(Config{URL: srv.URL})
	fastRetry(x)
	err := x.ExportSpans(ctx, spans)
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "your request is malformed") {
		t.Errorf("400: err = %v", err)
	}
	if reqs := c.Take(); len(reqs) != 1 {
		t.Errorf("400: %d requests, want 1", len(reqs))
	}

	// Nothing listens: the export tries until its timeout, then says so.
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	x = NewTraceExporter(Config{URL: url, Timeout: time.Second})
	fastRetry(x)
	if err := x.ExportSpans(ctx, spans); err == nil || !strings.Contains(err.Error(), "attempts") {
		t.Errorf("refused: err = %v, want one counting the attempts", err)
	}

	// The timeout falls during the second attempt, not between two: the
	// error still counts them.
	c, srv = newCollector(t)
	release := make(chan struct{})
	defer close(release)
	c.SetAnswer(func(w http.ResponseWriter, n int) {
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		<-release
	})
	x = NewTraceExporter(Config{URL: srv.URL, Timeout: 300 * time.Millisecond})
	fastRetry(x)
	if err := x.ExportSpans(ctx, spans); err == nil || !strings.Contains(err.Error(), "2 attempts") {
		t.Errorf("hung second attempt: err = %v, want one counting 2 attempts", err)
	}
}

// TestRetryAfter: a Retry-After past the export's timeout ends the
// export at once instead of sleeping through it.
func TestRetryAfter(t *testing.T) {
	c, srv := newCollector(t)
	c.SetAnswer(func(w http.ResponseWriter, _ int) {
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	x := NewTraceExporter(Config{URL: srv.URL, Timeout: time.Minute})
	done := make(chan error, 1)
	go func() { done <- x.ExportSpans(context.Background(), someSpans(t)) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "429") || !strings.Contains(err.Error(), "gave up") {
			t.Errorf("err = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the export waited for the Retry-After")
	}
	if reqs := c.Take(); len(reqs) != 1 {
		t.Errorf("%d requests, want 1", len(reqs))
	}
}

// TestHangingCollector: a collector that never answers holds an export
// for its timeout and no longer.
func TestHangingCollector(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	x := NewTraceExporter(Config{URL: srv.URL, Timeout: 200 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- x.ExportSpans(context.Background(), someSpans(t)) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the export did not end at its timeout")
	}
}

// TestPartialSuccess: a collector that takes part of a request says so,
// and the error carries its count and reason.
func TestPartialSuccess(t *testing.T) {
	c, srv := newCollector(t)
	c.SetAnswer(func(w http.ResponseWriter, _ int) {
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 3, ErrorMessage: "too old"}})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	})
	err := NewTraceExporter(Config{URL: srv.URL}).ExportSpans(context.Background(), someSpans(t))
	if err == nil || !strings.Contains(err.Error(), "3 spans rejected: too old") {
		t.Errorf("err = %v", err)
	}
	c.SetAnswer(func(w http.ResponseWriter, _ int) {
		b, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{PartialSuccess: &colmetricpb.ExportMetricsPartialSuccess{}})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	})
	if err := NewMetricExporter(Config{URL: srv.URL}).Export(context.Background(), someMetrics(t)); err != nil {
		t.Errorf("an empty partial success is a success: %v", err)
	}
}

// TestFromEnv: the headers, compression and timeout variables, the
// signal's own winning, and what is ignored with a warning.
func TestFromEnv(t *testing.T) {
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":                               "api-key=a%20b, tenant = t1",
		"OTEL_EXPORTER_OTLP_METRICS_HEADERS":                       "x=y",
		"OTEL_EXPORTER_OTLP_COMPRESSION":                           "gzip",
		"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT":                        "2500",
		"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT":                       "soon",
		"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION":                   "zstd",
		"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE":        "Delta",
		"OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": "base2_exponential_bucket_histogram",
	}
	getenv := func(k string) string { return env[k] }
	tr, warnings := FromEnv(getenv, "TRACES", "http://c/v1/traces")
	if len(warnings) != 0 || !tr.Gzip || tr.Timeout != 2500*time.Millisecond || tr.Headers["api-key"] != "a b" || tr.Headers["tenant"] != "t1" || tr.TLS != nil {
		t.Errorf("traces: %+v, warnings %q", tr, warnings)
	}
	m, warnings := FromEnv(getenv, "METRICS", "http://c/v1/metrics")
	if len(warnings) != 2 || m.Gzip || m.Timeout != defaultTimeout || len(m.Headers) != 1 || m.Headers["x"] != "y" {
		t.Errorf("metrics: %+v, warnings %q", m, warnings)
	}
	x := NewMetricExporter(m)
	if x.Temporality(sdkmetric.InstrumentKindCounter) != metricdata.DeltaTemporality ||
		x.Temporality(sdkmetric.InstrumentKindUpDownCounter) != metricdata.CumulativeTemporality {
		t.Error("delta preference not applied")
	}
	if _, ok := x.Aggregation(sdkmetric.InstrumentKindHistogram).(sdkmetric.AggregationBase2ExponentialHistogram); !ok {
		t.Error("exponential histograms not applied")
	}
	low := NewMetricExporter(Config{Temporality: "lowmemory"})
	if low.Temporality(sdkmetric.InstrumentKindObservableCounter) != metricdata.CumulativeTemporality ||
		low.Temporality(sdkmetric.InstrumentKindHistogram) != metricdata.DeltaTemporality {
		t.Error("lowmemory preference not applied")
	}

	for _, bad := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
		{"OTEL_EXPORTER_OTLP_HEADERS": "k=%zz"},
		{"OTEL_EXPORTER_OTLP_HEADERS": "k=a%0Db"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT": "-1"},
		{"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"},
		{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/nonexistent/c.pem"},
		{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "sometimes"},
	} {
		cfg, warnings := FromEnv(func(k string) string { return bad[k] }, "METRICS", "http://c")
		if len(warnings) != 1 || cfg.Headers != nil || cfg.TLS != nil || cfg.Timeout != defaultTimeout || cfg.Temporality != "" {
			t.Errorf("%v: %+v, warnings %q", bad, cfg, warnings)
		}
	}
}

// TestHeadersAndGzip: what FromEnv read reaches the collector.
func TestHeadersAndGzip(t *testing.T) {
	c, srv := newCollector(t)
	cfg, _ := FromEnv(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20s3cret", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}[k]
	}, "TRACES", srv.URL)
	cfg.UserAgent = "codemode/test"
	if err := NewTraceExporter(cfg).ExportSpans(context.Background(), someSpans(t)); err != nil {
		t.Fatal(err)
	}
	reqs := c.Take()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	h := reqs[0].Header
	if h.Get("Authorization") != "Bearer s3cret" || h.Get("Content-Encoding") != "gzip" || h.Get("User-Agent") != "codemode/test" {
		t.Errorf("headers %v", h)
	}
	var r coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(reqs[0].Body, &r); err != nil || countSpans(&r) == 0 {
		t.Errorf("the gzipped body: %v, %d spans", err, countSpans(&r))
	}
}

// TestTLS: OTEL_EXPORTER_OTLP_CERTIFICATE trusts a collector's own CA,
// and CLIENT_CERTIFICATE with CLIENT_KEY present a client certificate
// to one that asks. An untrusted collector fails at once: a bad
// certificate is not tried again.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	clientCert, clientKey := selfSigned(t, dir, "client")
	pool := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(clientCert)
	pool.AppendCertsFromPEM(pemBytes)

	c := &otlptest.Collector{}
	srv := httptest.NewUnstartedServer(c)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted attempt's handshake error
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_CERTIFICATE":        ca,
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": clientCert,
		"OTEL_EXPORTER_OTLP_CLIENT_KEY":         clientKey,
	}
	cfg, warnings := FromEnv(func(k string) string { return env[k] }, "TRACES", srv.URL)
	if len(warnings) != 0 {
		t.Fatal(warnings)
	}
	if err := NewTraceExporter(cfg).ExportSpans(context.Background(), someSpans(t)); err != nil {
		t.Fatalf("with the CA and the client certificate: %v", err)
	}
	if reqs := c.Take(); len(reqs) != 1 {
		t.Errorf("%d requests", len(reqs))
	}

	x := NewTraceExporter(Config{URL: srv.URL, Timeout: time.Minute})
	fastRetry(x)
	done := make(chan error, 1)
	go func() { done <- x.ExportSpans(context.Background(), someSpans(t)) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("untrusted: err = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a certificate error was retried")
	}
}

// selfSigned writes a self-signed certificate and its key.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestShutdown: an exporter that is shut down sends nothing more.
func TestShutdown(t *testing.T) {
	c, srv := newCollector(t)
	x := NewTraceExporter(Config{URL: srv.URL})
	if err := x.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := x.ExportSpans(context.Background(), someSpans(t)); !errors.Is(err, errShutdown) {
		t.Errorf("err = %v", err)
	}
	if reqs := c.Take(); len(reqs) != 0 {
		t.Errorf("%d requests after shutdown", len(reqs))
	}
}

// TestRedirectElsewhere: a collector that redirects to another host does
// not get the headers sent there; the export fails with its status. A
// redirect on the same host is followed.
func TestRedirectElsewhere(t *testing.T) {
	other, otherSrv := newCollector(t)
	c, srv := newCollector(t)
	c.SetAnswer(func(w http.ResponseWriter, _ int) {
		w.Header().Set("Location", otherSrv.URL+"/v1/traces")
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	x := NewTraceExporter(Config{URL: srv.URL + "/v1/traces", Headers: map[string]string{"api-key": "s3cret"}})
	err := x.ExportSpans(context.Background(), someSpans(t))
	if err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("err = %v, want the redirect's status", err)
	}
	if n := len(other.Take()); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
	// Same host: the request goes on to /moved, with its headers and
	// its body.
	c.SetAnswer(func(w http.ResponseWriter, _ int) {
		if r := c.Requests(); r[len(r)-1].Path == "/moved" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Location", "/moved")
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	if err := x.ExportSpans(context.Background(), someSpans(t)); err != nil {
		t.Errorf("same-host redirect: %v", err)
	}
	reqs := c.Take()
	if last := reqs[len(reqs)-1]; last.Path != "/moved" || last.Header.Get("api-key") != "s3cret" || len(last.Body) == 0 {
		t.Errorf("the redirected request: %s %v, %d bytes", last.Path, last.Header, len(last.Body))
	}
}
