package otlp

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// MetricExporter sends metrics to an OTLP/HTTP endpoint. It is an
// sdkmetric.Exporter; give it to sdkmetric.NewPeriodicReader.
type MetricExporter struct {
	c           *client
	temporality sdkmetric.TemporalitySelector
	aggregation sdkmetric.AggregationSelector
}

// NewMetricExporter returns an exporter posting to cfg.URL, with the
// temporality and histogram aggregation cfg asks for.
func NewMetricExporter(cfg Config) *MetricExporter {
	x := &MetricExporter{c: newClient(cfg, "data points"), temporality: sdkmetric.DefaultTemporalitySelector, aggregation: sdkmetric.DefaultAggregationSelector}
	switch cfg.Temporality {
	case "delta":
		x.temporality = deltaTemporality
	case "lowmemory":
		x.temporality = lowMemoryTemporality
	}
	if cfg.ExponentialHistograms {
		x.aggregation = exponentialHistograms
	}
	return x
}

// Temporality is the temporality the configuration asks for kind.
func (x *MetricExporter) Temporality(kind sdkmetric.InstrumentKind) metricdata.Temporality {
	return x.temporality(kind)
}

// Aggregation is the aggregation the configuration asks for kind.
func (x *MetricExporter) Aggregation(kind sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return x.aggregation(kind)
}

// Export sends rm as one ExportMetricsServiceRequest.
func (x *MetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	body, err := encodeMetrics(rm)
	if len(body) == 0 {
		return err
	}
	if perr := x.c.post(ctx, body); perr != nil {
		return perr
	}
	return err
}

// ForceFlush has nothing to flush: every Export is sent before it returns.
func (x *MetricExporter) ForceFlush(context.Context) error { return nil }

// Shutdown makes later exports fail.
func (x *MetricExporter) Shutdown(context.Context) error {
	x.c.shutdown()
	return nil
}

// deltaTemporality is the specification's "delta" preference: counters
// and histograms report deltas, up-down counters stay cumulative.
func deltaTemporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	switch k {
	case sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindObservableCounter, sdkmetric.InstrumentKindHistogram:
		return metricdata.DeltaTemporality
	}
	return metricdata.CumulativeTemporality
}

// lowMemoryTemporality is the "lowmemory" preference: synchronous
// counters and histograms report deltas, which the SDK need not keep.
func lowMemoryTemporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	switch k {
	case sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindHistogram:
		return metricdata.DeltaTemporality
	}
	return metricdata.CumulativeTemporality
}

// exponentialHistograms is the "base2_exponential_bucket_histogram"
// default histogram aggregation, with the specification's defaults.
func exponentialHistograms(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	if k == sdkmetric.InstrumentKindHistogram {
		return sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}
	}
	return sdkmetric.DefaultAggregationSelector(k)
}

// encodeMetrics writes an ExportMetricsServiceRequest. A metric of a
// kind OTLP cannot carry is left out and named in the error; the rest is
// still encoded.
func encodeMetrics(rm *metricdata.ResourceMetrics) ([]byte, error) {
	if rm == nil {
		return nil, nil
	}
	var e enc
	var skipped []string
	e.msg(1, func() { // resource_metrics
		e.msg(1, func() {
			if rm.Resource != nil {
				e.resource(rm.Resource)
			}
		})
		for _, sm := range rm.ScopeMetrics {
			e.msg(2, func() { // scope_metrics
				e.msg(1, func() { e.scope(sm.Scope) })
				for _, m := range sm.Metrics {
					if !encodable(m.Data) {
						skipped = append(skipped, fmt.Sprintf("%s (%T)", m.Name, m.Data))
						continue
					}
					e.msg(2, func() { e.metric(m) })
				}
				e.str(3, sm.Scope.SchemaURL)
			})
		}
		if rm.Resource != nil {
			e.str(3, rm.Resource.SchemaURL())
		}
	})
	if len(skipped) > 0 {
		return e.b, fmt.Errorf("otlp: metrics of an unknown aggregation or temporality are not exported: %s", strings.Join(skipped, ", "))
	}
	return e.b, nil
}

// encodable says whether data is an aggregation OTLP carries, with a
// known temporality.
func encodable(data metricdata.Aggregation) bool {
	known := func(t metricdata.Temporality) bool {
		return t == metricdata.DeltaTemporality || t == metricdata.CumulativeTemporality
	}
	switch d := data.(type) {
	case metricdata.Gauge[int64], metricdata.Gauge[float64], metricdata.Summary:
		return true
	case metricdata.Sum[int64]:
		return known(d.Temporality)
	case metricdata.Sum[float64]:
		return known(d.Temporality)
	case metricdata.Histogram[int64]:
		return known(d.Temporality)
	case metricdata.Histogram[float64]:
		return known(d.Temporality)
	case metricdata.ExponentialHistogram[int64]:
		return known(d.Temporality)
	case metricdata.ExponentialHistogram[float64]:
		return known(d.Temporality)
	}
	return false
}

func (e *enc) metric(m metricdata.Metrics) {
	e.str(1, m.Name)
	e.str(2, m.Description)
	e.str(3, m.Unit)
	switch d := m.Data.(type) {
	case metricdata.Gauge[int64]:
		e.msg(5, func() { numberPoints(e, d.DataPoints) })
	case metricdata.Gauge[float64]:
		e.msg(5, func() { numberPoints(e, d.DataPoints) })
	case metricdata.Sum[int64]:
		e.msg(7, func() { sum(e, d) })
	case metricdata.Sum[float64]:
		e.msg(7, func() { sum(e, d) })
	case metricdata.Histogram[int64]:
		e.msg(9, func() { histogram(e, d) })
	case metricdata.Histogram[float64]:
		e.msg(9, func() { histogram(e, d) })
	case metricdata.ExponentialHistogram[int64]:
		e.msg(10, func() { expHistogram(e, d) })
	case metricdata.ExponentialHistogram[float64]:
		e.msg(10, func() { expHistogram(e, d) })
	case metricdata.Summary:
		e.msg(11, func() { summary(e, d) })
	}
}

// temporality is OTLP's AggregationTemporality: 1 delta, 2 cumulative.
func temporality(t metricdata.Temporality) uint64 {
	if t == metricdata.DeltaTemporality {
		return 1
	}
	return 2
}

func sum[N int64 | float64](e *enc, s metricdata.Sum[N]) {
	numberPoints(e, s.DataPoints)
	e.uint(2, temporality(s.Temporality))
	e.bool(3, s.IsMonotonic)
}

func (e *enc) attributes(field int, set attribute.Set) {
	for it := set.Iter(); it.Next(); {
		e.keyValue(field, it.Attribute())
	}
}

func numberPoints[N int64 | float64](e *enc, points []metricdata.DataPoint[N]) {
	for _, p := range points {
		e.msg(1, func() {
			e.fixed64(2, unixNano(p.StartTime))
			e.fixed64(3, unixNano(p.Time))
			number(e, 4, 6, p.Value)
			exemplars(e, 5, p.Exemplars)
			e.attributes(7, p.Attributes)
		})
	}
}

// number writes a oneof of a double (asDouble) and an sfixed64 (asInt),
// present even when zero.
func number[N int64 | float64](e *enc, asDouble, asInt int, v N) {
	switch v := any(v).(type) {
	case int64:
		e.tag(asInt, wireFixed64)
		e.b = binary.LittleEndian.AppendUint64(e.b, uint64(v))
	case float64:
		e.optDouble(asDouble, v)
	}
}

func exemplars[N int64 | float64](e *enc, field int, xs []metricdata.Exemplar[N]) {
	for _, x := range xs {
		e.msg(field, func() {
			e.fixed64(2, unixNano(x.Time))
			number(e, 3, 6, x.Value)
			e.bytes(4, x.SpanID)
			e.bytes(5, x.TraceID)
			for _, kv := range x.FilteredAttributes {
				e.keyValue(7, kv)
			}
		})
	}
}

func histogram[N int64 | float64](e *enc, h metricdata.Histogram[N]) {
	for _, p := range h.DataPoints {
		e.msg(1, func() {
			e.fixed64(2, unixNano(p.StartTime))
			e.fixed64(3, unixNano(p.Time))
			e.fixed64(4, p.Count)
			e.optDouble(5, float64(p.Sum))
			e.packedFixed64(6, p.BucketCounts)
			if len(p.Bounds) > 0 {
				bits := make([]uint64, len(p.Bounds))
				for i, b := range p.Bounds {
					bits[i] = math.Float64bits(b)
				}
				e.packedFixed64(7, bits)
			}
			exemplars(e, 8, p.Exemplars)
			e.attributes(9, p.Attributes)
			if v, ok := p.Min.Value(); ok {
				e.optDouble(11, float64(v))
			}
			if v, ok := p.Max.Value(); ok {
				e.optDouble(12, float64(v))
			}
		})
	}
	e.uint(2, temporality(h.Temporality))
}

func expHistogram[N int64 | float64](e *enc, h metricdata.ExponentialHistogram[N]) {
	buckets := func(field int, b metricdata.ExponentialBucket) {
		e.msg(field, func() {
			e.sint32(1, b.Offset)
			e.packedVarint(2, b.Counts)
		})
	}
	for _, p := range h.DataPoints {
		e.msg(1, func() {
			e.attributes(1, p.Attributes)
			e.fixed64(2, unixNano(p.StartTime))
			e.fixed64(3, unixNano(p.Time))
			e.fixed64(4, p.Count)
			e.optDouble(5, float64(p.Sum))
			e.sint32(6, p.Scale)
			e.fixed64(7, p.ZeroCount)
			buckets(8, p.PositiveBucket)
			buckets(9, p.NegativeBucket)
			exemplars(e, 11, p.Exemplars)
			if v, ok := p.Min.Value(); ok {
				e.optDouble(12, float64(v))
			}
			if v, ok := p.Max.Value(); ok {
				e.optDouble(13, float64(v))
			}
			e.double(14, p.ZeroThreshold)
		})
	}
	e.uint(2, temporality(h.Temporality))
}

func summary(e *enc, s metricdata.Summary) {
	for _, p := range s.DataPoints {
		e.msg(1, func() {
			e.fixed64(2, unixNano(p.StartTime))
			e.fixed64(3, unixNano(p.Time))
			e.fixed64(4, p.Count)
			e.double(5, p.Sum)
			for _, q := range p.QuantileValues {
				e.msg(6, func() {
					e.double(1, q.Quantile)
					e.double(2, q.Value)
				})
			}
			e.attributes(7, p.Attributes)
		})
	}
}
