// Package otlptest is an OTLP/HTTP collector on loopback for tests: it
// keeps each request, its body decompressed.
package otlptest

import (
	"compress/gzip"
	"io"
	"net/http"
	"sync"
)

// Request is one request the Collector received.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte // gunzipped when it came gzipped
}

// Collector is an http.Handler that keeps what it is sent and answers
// 200 with an empty protobuf body (a full success), or as SetAnswer says.
type Collector struct {
	mu     sync.Mutex
	reqs   []Request
	answer func(w http.ResponseWriter, n int)
}

// SetAnswer makes the collector answer the n-th request it receives
// (counted from 1) with answer; nil restores the full success.
func (c *Collector) SetAnswer(answer func(w http.ResponseWriter, n int)) {
	c.mu.Lock()
	c.answer = answer
	c.mu.Unlock()
}

func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
	n, answer := len(c.reqs), c.answer
	c.mu.Unlock()
	if answer != nil {
		answer(w, n)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// Take returns the requests received so far and forgets them.
func (c *Collector) Take() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	reqs := c.reqs
	c.reqs = nil
	return reqs
}

// Requests returns the requests received so far, keeping them.
func (c *Collector) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.reqs...)
}

// Bodies returns the bodies of the requests received so far at path.
func (c *Collector) Bodies(path string) [][]byte {
	var out [][]byte
	for _, r := range c.Requests() {
		if r.Path == path {
			out = append(out, r.Body)
		}
	}
	return out
}
