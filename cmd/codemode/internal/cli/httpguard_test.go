package cli

import "testing"

// TestLoopbackBind: only addresses that bind loopback interfaces alone
// count as loopback; every-interface forms and other names do not.
func TestLoopbackBind(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.1.2.3:0", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{"LOCALHOST:8080", true},
		{"[::ffff:127.0.0.1]:8080", true},
		{":8080", false},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{"192.168.1.10:8080", false},
		{"[fe80::1%eth0]:8080", false},
		{"localhost.example.com:8080", false},
		{"127.0.0.1.nip.io:8080", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			got, err := loopbackBind(tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := loopbackBind("127.0.0.1"); err == nil {
		t.Error("got no error for an address without a port, want one")
	}
}

// TestOriginOK: a browser origin passes only when its host is loopback.
func TestOriginOK(t *testing.T) {
	for _, tc := range []struct {
		origin string
		want   bool
	}{
		{"http://localhost:6274", true},
		{"http://127.0.0.1", true},
		{"https://[::1]:8443", true},
		{"http://evil.example", false},
		{"http://localhost.evil.example", false},
		{"null", false},
		{"file://", false},
		{"chrome-extension://abc", false},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			if got := originOK(tc.origin); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
