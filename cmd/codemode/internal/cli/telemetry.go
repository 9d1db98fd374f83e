package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cmd/codemode/internal/otlp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// telemetry is the OpenTelemetry export the OTEL_* environment asked
// for. The exporters' settings (headers, timeouts, TLS, compression,
// temporality) are read by otlp.FromEnv; the SDK reads the sampler and
// batching variables itself.
type telemetry struct {
	tp   *sdktrace.TracerProvider // nil: traces are off
	mp   *sdkmetric.MeterProvider // nil: metrics are off
	warn func(format string, args ...any)
}

// flushTimeout bounds the export at exit, so an unreachable collector
// delays the command's end by at most this.
const flushTimeout = 5 * time.Second

// signals says which signals to export, and where.
type signals struct {
	traces, metrics bool
	// tracesURL and metricsURL are the OTLP/HTTP endpoints, when the
	// signal is on.
	tracesURL, metricsURL string
}

// defaultOTLPEndpoint is the OpenTelemetry specification's default for
// OTLP over HTTP.
const defaultOTLPEndpoint = "http://localhost:4318"

// otlpURL is a signal's endpoint as the specification builds it: the
// signal's own variable as it is (the root path when it has none), else
// the base variable with /v1/<signal> appended to its path, else the
// default. A value that is not an http or https URL — "collector:4318",
// which the exporters would read as a scheme "collector" — is invalid:
// it is ignored, as the specification asks for invalid values, with a
// warning that says what to write.
func otlpURL(getenv func(string) string, signal string, warn func(string)) (string, bool) {
	valid := func(name string) (*url.URL, bool) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return nil, false
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			warn(fmt.Sprintf("%s=%s is ignored: OTLP over HTTP needs a URL with its scheme, such as http://%s", name, v, strings.TrimPrefix(strings.TrimPrefix(v, "//"), "://")))
			return nil, false
		}
		return u, true
	}
	if u, ok := valid("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"); ok {
		if u.Path == "" {
			u.Path = "/"
		}
		return u.String(), true
	}
	base, set := valid("OTEL_EXPORTER_OTLP_ENDPOINT")
	if !set {
		base, _ = url.Parse(defaultOTLPEndpoint)
	}
	base.Path = path.Join("/", base.Path, "v1", strings.ToLower(signal))
	return base.String(), set
}

// telemetryPlan reads the environment as the OpenTelemetry SDK
// specification describes, except that a signal is exported only when
// asked: an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT, or the signal's
// own) is set, or OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER names
// otlp. A command that exported to localhost:4318 whenever nothing was
// set would log export errors on every machine without a collector.
// The returned warnings name what was asked for but is not supported.
func telemetryPlan(getenv func(string) string) (signals, []string) {
	var warnings []string
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return signals{}, nil
	}
	warn := func(w string) {
		if !slices.Contains(warnings, w) {
			warnings = append(warnings, w)
		}
	}
	var urls [2]string
	want := func(signal, exporterVar string) bool {
		u, endpoint := otlpURL(getenv, signal, warn)
		if signal == "TRACES" {
			urls[0] = u
		} else {
			urls[1] = u
		}
		on := endpoint
		if v := strings.TrimSpace(getenv(exporterVar)); v != "" {
			on = false
			for e := range strings.SplitSeq(v, ",") {
				switch e = strings.TrimSpace(e); e {
				case "otlp":
					on = true
				case "none", "":
				default:
					warnings = append(warnings, exporterVar+"="+e+" is not supported (only otlp or none)")
				}
			}
		}
		if !on {
			return false
		}
		protocol := getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")
		if protocol == "" {
			protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		switch protocol {
		case "", "http/protobuf", "http/json":
			return true
		}
		warnings = append(warnings, "OTLP over "+protocol+" is not supported, so "+strings.ToLower(signal)+" are not exported: codemode exports OTLP over HTTP (http/protobuf, port 4318)")
		return false
	}
	s := signals{traces: want("TRACES", "OTEL_TRACES_EXPORTER"), metrics: want("METRICS", "OTEL_METRICS_EXPORTER")}
	if s.traces {
		s.tracesURL = urls[0]
	}
	if s.metrics {
		s.metricsURL = urls[1]
	}
	return s, warnings
}

// startTelemetry starts the export the environment asks for. It never
// fails a command: what cannot start is a warning and stays off.
func startTelemetry(warn func(format string, args ...any)) *telemetry {
	t := &telemetry{warn: warn}
	plan, warnings := telemetryPlan(os.Getenv)
	for _, w := range warnings {
		warn("telemetry: %s", w)
	}
	if !plan.traces && !plan.metrics {
		return t
	}
	ctx := context.Background()
	// service.name defaults to codemode; OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES, read later, override it.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "codemode"), attribute.String("service.version", version())),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil {
		warn("telemetry: resource: %v", err) // res still holds what was understood
	}
	// Export errors come later, from the exporters' goroutines.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { warn("telemetry: %v", err) }))
	config := func(signal, url string) otlp.Config {
		cfg, warnings := otlp.FromEnv(os.Getenv, signal, url)
		for _, w := range warnings {
			warn("telemetry: %s", w)
		}
		cfg.UserAgent = "codemode/" + version()
		return cfg
	}
	if plan.traces {
		exp := otlp.NewTraceExporter(config("TRACES", plan.tracesURL))
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	}
	if plan.metrics {
		exp := otlp.NewMetricExporter(config("METRICS", plan.metricsURL))
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
	}
	return t
}

// configure gives o the providers that are on.
func (t *telemetry) configure(o *codemode.Options) {
	// Assigned one by one: a nil *TracerProvider in the interface field
	// would not be a nil interface.
	if t.tp != nil {
		o.TracerProvider = t.tp
	}
	if t.mp != nil {
		o.MeterProvider = t.mp
	}
}

// shutdown exports what is buffered and stops the exporters; call it
// after the runs have ended.
func (t *telemetry) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if t.tp != nil {
		if err := t.tp.Shutdown(ctx); err != nil {
			t.warn("telemetry: traces not all exported at exit: %v", err)
		}
	}
	if t.mp != nil {
		if err := t.mp.Shutdown(ctx); err != nil {
			t.warn("telemetry: metrics not all exported at exit: %v", err)
		}
	}
}
