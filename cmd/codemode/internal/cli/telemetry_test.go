package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/codemode-go/codemode/cmd/codemode/internal/otlp/otlptest"
)

func TestTelemetryPlan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		want     signals
		warnings int
	}{
		{"nothing set", nil, signals{}, 0},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, signals{traces: true, metrics: true}, 0},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c/v1/traces"}, signals{traces: true}, 0},
		{"metrics endpoint", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c/v1/metrics"}, signals{metrics: true}, 0},
		{"traces exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none"}, signals{metrics: true}, 0},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "TRUE"}, signals{}, 0},
		{"sdk not disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "false"}, signals{traces: true, metrics: true}, 0},
		{"otlp asked without endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, signals{traces: true}, 0},
		{"unsupported exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_METRICS_EXPORTER": "prometheus"}, signals{traces: true}, 1},
		{"otlp among others", map[string]string{"OTEL_TRACES_EXPORTER": "console,otlp"}, signals{traces: true}, 1},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, signals{}, 2},
		{"grpc for metrics only", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"}, signals{traces: true}, 1},
		{"json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, signals{traces: true, metrics: true}, 0},
		{"endpoint without scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, signals{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings := telemetryPlan(func(k string) string { return tc.env[k] })
			got.tracesURL, got.metricsURL = "", "" // TestOTLPEndpoints checks them
			if got != tc.want || len(warnings) != tc.warnings {
				t.Errorf("got %+v with warnings %q, want %+v with %d", got, warnings, tc.want, tc.warnings)
			}
		})
	}
}

// TestOTLPEndpoints: the URLs the exporters get, as the specification
// builds them.
func TestOTLPEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name            string
		env             map[string]string
		traces, metrics string
		warning         string
	}{
		{"default is http", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp"},
			"http://localhost:4318/v1/traces", "http://localhost:4318/v1/metrics", ""},
		{"base gets the signal's path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c.example:4318/otel/"},
			"https://c.example:4318/otel/v1/traces", "https://c.example:4318/otel/v1/metrics", ""},
		{"a signal's own is used as it is", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x"},
			"http://t:1/x", "http://c/v1/metrics", ""},
		{"a signal's own without a path gets the root", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1"},
			"http://t:1/", "", ""},
		{"no scheme: ignored, with what to write", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318", "OTEL_TRACES_EXPORTER": "otlp"},
			"http://localhost:4318/v1/traces", "", "OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318 is ignored: OTLP over HTTP needs a URL with its scheme, such as http://collector:4318"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings := telemetryPlan(func(k string) string { return tc.env[k] })
			if got.tracesURL != tc.traces || got.metricsURL != tc.metrics {
				t.Errorf("got traces %q, metrics %q; want %q, %q", got.tracesURL, got.metricsURL, tc.traces, tc.metrics)
			}
			if w := strings.Join(warnings, "\n"); w != tc.warning {
				t.Errorf("got warnings %q, want %q", w, tc.warning)
			}
		})
	}
}

// TestOTLPDefaultEndpoint: OTEL_TRACES_EXPORTER=otlp and no endpoint
// posts to http://localhost:4318/v1/traces, the specification's default,
// in plain HTTP.
func TestOTLPDefaultEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:4318")
	if err != nil {
		t.Skipf("the default OTLP port is taken on this machine: %v", err)
	}
	c := &otlptest.Collector{}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: c}}
	srv.Start()
	defer srv.Close()
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	code, out, errs := runCLI(t, `return await tools.shop.listOrders({})`, "run", "--demo-tools", "--cache-dir", engineCache, "-")
	if code != exitOK || strings.Contains(errs, "telemetry") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if len(c.Bodies("/v1/traces")) == 0 {
		t.Errorf("got %d requests, none with spans at /v1/traces", len(c.Requests()))
	}
}

// clearOTelEnv unsets the variables that could redirect or stop the
// export under test, whatever the environment running the tests holds.
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_TRACES_SAMPLER",
	} {
		t.Setenv(k, "")
	}
}

// TestExportsOTLP runs "codemode run" and "codemode mcp" against a
// loopback collector and decodes the protobuf it receives: the run's span
// with its tool calls' spans under it, and the metrics.
func TestExportsOTLP(t *testing.T) {
	const program = `const { orders } = await tools.shop.listOrders({})
const c = await tools.shop.getCustomer({ id: orders[0].customerId })
return c.name`
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"run", func(t *testing.T) {
			code, out, errs := runCLI(t, program, "run", "--demo-tools", "--cache-dir", engineCache, "-")
			if code != exitOK || strings.Contains(errs, "telemetry") {
				t.Fatalf("exit %d\n%s\n%s", code, out, errs)
			}
		}},
		{"mcp", func(t *testing.T) {
			cs, stderr, exit := startStdio(t, context.Background(), "--demo-tools")
			if isErr, v := callExecute(t, cs, program); isErr || v["ok"] != true {
				t.Errorf("result = %v", v)
			}
			_ = cs.Close()
			select {
			case <-exit:
			case <-time.After(10 * time.Second):
				t.Fatal("the server did not stop at the end of its input")
			}
			if strings.Contains(stderr.String(), "telemetry") {
				t.Errorf("stderr:\n%s", stderr)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &otlptest.Collector{}
			srv := httptest.NewServer(c)
			defer srv.Close()
			clearOTelEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
			tc.run(t) // returns after the flush at exit: everything has arrived
			checkExport(t, c)
		})
	}
}

// checkExport decodes what the collector received.
func checkExport(t *testing.T, c *otlptest.Collector) {
	t.Helper()
	for _, r := range c.Requests() {
		if got := r.Header.Get("Content-Type"); got != "application/x-protobuf" {
			t.Errorf("%s Content-Type: got %q, want application/x-protobuf", r.Path, got)
		}
	}
	type span struct{ id, parent, name string }
	var spans []span
	var service string
	for _, b := range c.Bodies("/v1/traces") {
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("a /v1/traces body is not an ExportTraceServiceRequest: %v", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans = append(spans, span{string(s.SpanId), string(s.ParentSpanId), s.Name})
				}
			}
		}
	}
	if service != "codemode" {
		t.Errorf("service.name: got %q, want codemode", service)
	}
	i := slices.IndexFunc(spans, func(s span) bool { return s.name == "codemode.execute" })
	if i < 0 {
		t.Fatalf("no codemode.execute span among %d received", len(spans))
	}
	calls := 0
	for _, s := range spans {
		if s.name == "codemode.tool_call" {
			calls++
			if s.parent != spans[i].id {
				t.Errorf("a tool call span's parent is not the run's span")
			}
		}
	}
	if calls != 2 {
		t.Errorf("got %d tool call spans, want 2", calls)
	}

	var metrics []string
	for _, b := range c.Bodies("/v1/metrics") {
		var req colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("a /v1/metrics body is not an ExportMetricsServiceRequest: %v", err)
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					metrics = append(metrics, m.Name)
				}
			}
		}
	}
	for _, want := range []string{"codemode.runs", "codemode.run.duration", "codemode.runs.active", "codemode.tool_calls", "codemode.tool_call.duration"} {
		if !slices.Contains(metrics, want) {
			t.Errorf("metric %s not received; got %v", want, metrics)
		}
	}
}

// TestRunWithoutOTelEnvExportsNothing: with no OTEL_* variable set,
// nothing is sent anywhere and no warning is printed.
func TestRunWithoutOTelEnvExportsNothing(t *testing.T) {
	clearOTelEnv(t)
	tel := startTelemetry(func(format string, args ...any) { t.Errorf("warning: "+format, args...) })
	if tel.tp != nil || tel.mp != nil {
		t.Errorf("providers started without being asked: %+v", tel)
	}
	tel.shutdown()
}
