package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Config is one signal's export.
type Config struct {
	// URL is the endpoint the requests are posted to, whole:
	// http://localhost:4318/v1/traces.
	URL string
	// Headers are set on every request (an API key, say).
	Headers map[string]string
	// Gzip compresses request bodies.
	Gzip bool
	// Timeout bounds one export, its retries included. Zero means 10 s.
	Timeout time.Duration
	// TLS is the client's TLS for https URLs; nil means the system's
	// roots and no client certificate.
	TLS *tls.Config
	// UserAgent names the sender.
	UserAgent string

	// Temporality is the metrics' temporality preference: "cumulative"
	// (or empty), "delta" or "lowmemory".
	Temporality string
	// ExponentialHistograms makes histograms base-2 exponential ones.
	ExponentialHistograms bool
}

// defaultTimeout is the specification's OTEL_EXPORTER_OTLP_TIMEOUT.
const defaultTimeout = 10 * time.Second

// FromEnv reads signal's configuration (TRACES or METRICS) from the
// OTEL_EXPORTER_OTLP_* variables, the signal's own winning over the
// general ones: headers, compression, timeout, certificate, client
// certificate and key, and for metrics the temporality preference and the
// default histogram aggregation. The endpoint is not read here: the
// caller gives it in url. A value that cannot be used is left out, as the
// specification asks, and a warning says so.
func FromEnv(getenv func(string) string, signal, url string) (Config, []string) {
	cfg := Config{URL: url, Timeout: defaultTimeout}
	var warnings []string
	// get returns the signal's variable, else the general one, and the
	// name of the one that was set.
	get := func(name string) (string, string) {
		for _, n := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_" + name, "OTEL_EXPORTER_OTLP_" + name} {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v, n
			}
		}
		return "", ""
	}
	if v, n := get("HEADERS"); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s is ignored: %v", n, err))
		} else {
			cfg.Headers = h
		}
	}
	switch v, n := get("COMPRESSION"); strings.ToLower(v) {
	case "", "none":
	case "gzip":
		cfg.Gzip = true
	default:
		warnings = append(warnings, fmt.Sprintf("%s=%s is ignored: the compression is gzip or none", n, v))
	}
	if v, n := get("TIMEOUT"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			warnings = append(warnings, fmt.Sprintf("%s=%s is ignored: the timeout is a number of milliseconds above 0", n, v))
		} else {
			cfg.Timeout = time.Duration(min(ms, int64(time.Hour/time.Millisecond))) * time.Millisecond
		}
	}
	var tc tls.Config
	useTLS := false
	if v, n := get("CERTIFICATE"); v != "" {
		pem, err := os.ReadFile(v)
		pool := x509.NewCertPool()
		if err == nil && !pool.AppendCertsFromPEM(pem) {
			err = errors.New("no PEM certificate in it")
		}
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s=%s is ignored: %v", n, v, err))
		} else {
			tc.RootCAs, useTLS = pool, true
		}
	}
	certFile, cn := get("CLIENT_CERTIFICATE")
	keyFile, kn := get("CLIENT_KEY")
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s and %s are ignored: %v", cn, kn, err))
		} else {
			tc.Certificates, useTLS = []tls.Certificate{cert}, true
		}
	case certFile != "":
		warnings = append(warnings, fmt.Sprintf("%s is ignored without OTEL_EXPORTER_OTLP_CLIENT_KEY", cn))
	case keyFile != "":
		warnings = append(warnings, fmt.Sprintf("%s is ignored without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", kn))
	}
	if useTLS {
		cfg.TLS = &tc
	}
	if signal == "METRICS" {
		// These two exist only in the metrics' own form.
		metricsVar := func(name string) (string, string) {
			n := "OTEL_EXPORTER_OTLP_METRICS_" + name
			return strings.TrimSpace(getenv(n)), n
		}
		switch v, n := metricsVar("TEMPORALITY_PREFERENCE"); strings.ToLower(v) {
		case "", "cumulative":
		case "delta", "lowmemory":
			cfg.Temporality = strings.ToLower(v)
		default:
			warnings = append(warnings, fmt.Sprintf("%s=%s is ignored: it is cumulative, delta or lowmemory", n, v))
		}
		switch v, n := metricsVar("DEFAULT_HISTOGRAM_AGGREGATION"); strings.ToLower(v) {
		case "", "explicit_bucket_histogram":
		case "base2_exponential_bucket_histogram":
			cfg.ExponentialHistograms = true
		default:
			warnings = append(warnings, fmt.Sprintf("%s=%s is ignored: it is explicit_bucket_histogram or base2_exponential_bucket_histogram", n, v))
		}
	}
	return cfg, warnings
}

// parseHeaders reads the W3C-baggage-like list the specification uses
// for headers: key=value pairs separated by commas, values
// percent-encoded.
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return nil, fmt.Errorf("%q is not a key=value pair", pair)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("the value of %s: %v", k, err)
		}
		if strings.ContainsAny(val, "\r\n") {
			return nil, fmt.Errorf("the value of %s has a line break", k)
		}
		h[k] = val
	}
	return h, nil
}

// client posts encoded requests, retrying what the specification calls
// retryable.
type client struct {
	cfg    Config
	http   *http.Client
	items  string // what the partial success counts: "spans", "data points"
	closed atomic.Bool
	// backoff is the first wait between attempts; it doubles up to
	// maxBackoff, with jitter.
	backoff, maxBackoff time.Duration
}

func newClient(cfg Config, items string) *client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       cfg.TLS,
		MaxIdleConns:          4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
	hc := &http.Client{Transport: t, CheckRedirect: sameHost}
	return &client{cfg: cfg, http: hc, items: items, backoff: time.Second, maxBackoff: 5 * time.Second}
}

// sameHost follows a redirect only to the host the request was for: the
// headers (an API key, say) would go along, and Go's client drops only
// the ones it knows to be credentials. A redirect elsewhere is answered
// as it is, which fails the export with its status.
func sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("otlp: more than 5 redirects")
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return http.ErrUseLastResponse
	}
	return nil
}

func (c *client) shutdown() {
	c.closed.Store(true)
	c.http.CloseIdleConnections()
}

// maxResponse is as much of a response body as is read.
const maxResponse = 64 << 10

var errShutdown = errors.New("otlp: the exporter is shut down")

// post sends body, retrying 429, 502, 503, 504 and failed connections
// until cfg.Timeout (or ctx) ends; a Retry-After the collector sends is
// honored.
func (c *client) post(ctx context.Context, body []byte) error {
	if c.closed.Load() {
		return errShutdown
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	encoding := ""
	if c.cfg.Gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return fmt.Errorf("otlp: compressing: %w", err)
		}
		body, encoding = buf.Bytes(), "gzip"
	}
	wait := c.backoff
	// ended says how many attempts there were when the timeout fell,
	// during an attempt or between two.
	ended := func(err error, attempts int) error {
		return fmt.Errorf("%w (%d attempts, then %v)", err, attempts, ctx.Err())
	}
	for attempt := 1; ; attempt++ {
		retry, after, err := c.once(ctx, body, encoding)
		if !retry {
			if attempt > 1 && ctx.Err() != nil {
				return ended(err, attempt)
			}
			return err
		}
		if after <= 0 {
			after = wait/2 + rand.N(wait) // 0.5 to 1.5 times the backoff
			wait = min(2*wait, c.maxBackoff)
		}
		deadline, _ := ctx.Deadline()
		if time.Until(deadline) < after {
			return fmt.Errorf("%w (gave up after %d attempts: the next would pass the %v export timeout)", err, attempt, c.cfg.Timeout)
		}
		t := time.NewTimer(after)
		select {
		case <-ctx.Done():
			t.Stop()
			return ended(err, attempt)
		case <-t.C:
		}
	}
}

// once makes one attempt. retry says whether another may succeed, after
// the wait the collector asked for (0: none said).
func (c *client) once(ctx context.Context, body []byte, encoding string) (retry bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("otlp: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	if c.cfg.UserAgent != "" {
		req.Header.Set("User-Agent", c.cfg.UserAgent)
	}
	for k, v := range c.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// A connection refused or reset may pass; a bad certificate will
		// not, and neither will an ended context.
		var uerr *url.Error
		retry := ctx.Err() == nil && errors.As(err, &uerr) && !isTLSError(err)
		return retry, 0, fmt.Errorf("otlp: posting to %s: %w", c.cfg.URL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse)) // lets the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-protobuf") {
			return false, 0, c.partial(data)
		}
		return false, 0, nil
	}
	err = fmt.Errorf("otlp: %s answered %s: %s", c.cfg.URL, resp.Status, errorText(resp.Header.Get("Content-Type"), data))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true, retryAfter(resp.Header.Get("Retry-After")), err
	}
	return false, 0, err
}

func isTLSError(err error) bool {
	var cerr *tls.CertificateVerificationError
	var rerr tls.RecordHeaderError
	var aerr tls.AlertError
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	return errors.As(err, &cerr) || errors.As(err, &rerr) || errors.As(err, &aerr) || errors.As(err, &uerr) || errors.As(err, &herr)
}

// partial reads an Export*ServiceResponse: its partial_success (field 1)
// holds the count rejected (1) and why (2).
func (c *client) partial(data []byte) error {
	d := dec{data}
	for {
		field, wire, _, msg, ok := d.next()
		if !ok {
			return nil
		}
		if field != 1 || wire != wireBytes {
			continue
		}
		var rejected uint64
		var why string
		p := dec{msg}
		for {
			f, w, n, s, ok := p.next()
			if !ok {
				break
			}
			switch {
			case f == 1 && w == wireVarint:
				rejected = n
			case f == 2 && w == wireBytes:
				why = string(s)
			}
		}
		if rejected == 0 && why == "" {
			return nil
		}
		return fmt.Errorf("otlp: %s took the export in part: %d %s rejected: %s", c.cfg.URL, int64(rejected), c.items, cut(why))
	}
}

// errorText is what an error response says: a google.rpc.Status's
// message (field 2) in protobuf, else the body as text.
func errorText(contentType string, data []byte) string {
	if strings.HasPrefix(contentType, "application/x-protobuf") {
		d := dec{data}
		for {
			f, w, _, s, ok := d.next()
			if !ok {
				break
			}
			if f == 2 && w == wireBytes {
				return cut(string(s))
			}
		}
	}
	if s := strings.TrimSpace(string(data)); s != "" {
		return cut(s)
	}
	return "(empty body)"
}

// cut keeps a collector's text to a line's length, in valid UTF-8.
func cut(s string) string {
	const max = 300
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}
