package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// pki writes a CA and a certificate it signs for 127.0.0.1 (server and
// client use), as PEM files in dir.
func pki(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	caCert, _ := x509.ParseCertificate(caDER)
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(leafKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}

// A NATS server of one's own, as the README configures one for several
// hosts (TLS with client certificates, an account with JetStream and a
// user whose password comes from the environment): serve and worker join
// it with the --nats flags, and a program runs; without the client
// certificate, or with a wrong password, joining fails.
func TestServeOnANATSWithTLSAndAccounts(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := pki(t, dir)
	conf := filepath.Join(dir, "nats.conf")
	err := os.WriteFile(conf, []byte(fmt.Sprintf(`
server_name: nats-a
listen: 127.0.0.1:-1
jetstream { store_dir: %q }
tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }
accounts {
  CODEMODE {
    jetstream: enabled
    users: [ { user: codemode, password: $CODEMODE_NATS_PASSWORD } ]
  }
}
`, filepath.Join(dir, "js"), cert, key, ca)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CODEMODE_NATS_PASSWORD", "s3cret-for-the-test")
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	url := fmt.Sprintf("tls://127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)
	natsFlags := []string{"--nats", url, "--nats-tls-ca", ca, "--nats-tls-cert", cert, "--nats-tls-key", key,
		"--nats-user", "codemode", "--nats-password-env", "CODEMODE_NATS_PASSWORD"}
	join := append([]string{"--demo-tools", "--state-key-file", filepath.Join(dir, "state.key")}, natsFlags...)

	ctx := context.Background()
	cs, stderr, _ := startServe(t, ctx, join...)
	_, werr := startProcess(t, append([]string{"worker", "--cache-dir", engineCache}, join...)...)
	isErr, v := callExecute(t, cs, `return (await tools.shop.listOrders({})).orders.length`)
	if isErr || v["ok"] != true || v["value"] != float64(6) {
		t.Fatalf("result = %v\nfront:\n%s\nworker:\n%s", v, stderr, werr)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		var out, errb syncBuffer
		code := Run(append([]string{"nodes"}, natsFlags...), strings.NewReader(""), &out, &errb)
		if code == exitOK && strings.Count(out.String(), "\n") == 3 {
			break // the header, the front and the worker
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes over TLS: exit %d\n%s%s", code, out.String(), errb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	for _, tc := range []struct {
		drop []string
		env  string
		want string
	}{
		{drop: []string{"--nats-tls-cert", "--nats-tls-key"}, want: "connecting to NATS"},
		{env: "wrong", want: "connecting to NATS"},
	} {
		var args []string
		for i := 0; i < len(natsFlags); i++ {
			if contains(tc.drop, natsFlags[i]) {
				i++
				continue
			}
			args = append(args, natsFlags[i])
		}
		if tc.env != "" {
			t.Setenv("CODEMODE_WRONG_PASSWORD", tc.env)
			for i, a := range args {
				if a == "CODEMODE_NATS_PASSWORD" {
					args[i] = "CODEMODE_WRONG_PASSWORD"
				}
			}
		}
		var out, errb syncBuffer
		code := Run(append([]string{"nodes"}, args...), strings.NewReader(""), &out, &errb)
		if code != exitFailure || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d: %s", tc, code, errb.String())
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// serve's embedded server listens on every address with TLS: a worker
// process joins over TLS with the CA and the token, as one on another
// machine would, and runs the front's programs; without the CA it cannot
// join, and without TLS the address is refused.
func TestEmbeddedServerWithTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := pki(t, dir)
	data := filepath.Join(dir, "cluster")
	ctx := context.Background()
	cs, stderr, _ := startServe(t, ctx, "--demo-tools", "--data", data, "--state-key-file", filepath.Join(dir, "state.key"),
		"--nats-listen", "0.0.0.0:0", "--nats-listen-tls-cert", cert, "--nats-listen-tls-key", key)
	url, err := os.ReadFile(filepath.Join(data, "url"))
	if err != nil || !strings.HasPrefix(string(url), "tls://127.0.0.1:") {
		t.Fatalf("url %q %v\n%s", url, err, stderr)
	}
	tok, err := os.ReadFile(filepath.Join(data, "token"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CODEMODE_TEST_TOKEN", strings.TrimSpace(string(tok)))
	remote := []string{"--nats", strings.TrimSpace(string(url)), "--nats-token-env", "CODEMODE_TEST_TOKEN"}

	var errb syncBuffer
	if code := Run(append([]string{"nodes"}, remote...), strings.NewReader(""), &syncBuffer{}, &errb); code != exitFailure ||
		!strings.Contains(errb.String(), "certificate") {
		t.Fatalf("joining without the CA: exit %d %s", code, errb.String())
	}
	_, werr := startProcess(t, append([]string{"worker", "--demo-tools", "--state-key-file", filepath.Join(dir, "state.key"),
		"--cache-dir", engineCache, "--nats-tls-ca", ca}, remote...)...)
	isErr, v := callExecute(t, cs, `return (await tools.shop.listOrders({})).orders.length`)
	if isErr || v["ok"] != true || v["value"] != float64(6) {
		t.Fatalf("result = %v\nfront:\n%s\nworker:\n%s", v, stderr, werr)
	}

	var plain syncBuffer
	code := Run([]string{"serve", "--data", filepath.Join(dir, "other"), "--nats-listen", "0.0.0.0:0", "--cache-dir", engineCache},
		strings.NewReader(""), &syncBuffer{}, &plain)
	if code != exitFailure || !strings.Contains(plain.String(), "loopback only") {
		t.Fatalf("a non-loopback address without TLS: exit %d %s", code, plain.String())
	}
}
