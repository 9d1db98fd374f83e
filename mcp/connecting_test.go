package mcp

import "testing"

// TestNames: which programs name a namespace, and so wait for it while
// it connects.
func TestNames(t *testing.T) {
	for _, tc := range []struct {
		code, ns string
		want     bool
	}{
		{`await tools.fs.read({})`, "fs", true},
		{`await tools?.fs.read({})`, "fs", true},
		{`await tools . fs .read({})`, "fs", true},
		{`await tools["fs"].read({})`, "fs", true},
		{"await tools[`fs`].read({})", "fs", true},
		{`await tools['my-server'].x({})`, "my-server", true},
		{`await tools.fsx.read({})`, "fs", false},
		{`await mytools.fs.read({})`, "fs", false},
		{`const fs = 1; return fs`, "fs", false},
		{`await tools.my-server.x({})`, "my-server", false},
		{`await tools.$x.y()`, "$x", true},
	} {
		if got := names(tc.code, tc.ns); got != tc.want {
			t.Errorf("names(%q, %q) = %v, want %v", tc.code, tc.ns, got, tc.want)
		}
	}
}
