//go:build !codemode_nonats

package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedServer says whether this build can start an embedded NATS
// server (Config.URL empty). A build with the tag codemode_nonats
// cannot: it is 9.5 MB lighter, and joins only a NATS server of its own.
const EmbeddedServer = true

// startServer starts the embedded nats-server with JetStream and waits
// until it takes connections.
func startServer(o serverOptions) (embedded, error) {
	opts := &server.Options{
		ServerName:         o.name,
		Host:               o.host,
		Port:               o.port,
		Authorization:      o.token,
		JetStream:          true,
		StoreDir:           o.storeDir,
		NoSigs:             true,
		MaxPayload:         maxState,
		JetStreamMaxMemory: 64 << 20,
	}
	if o.tls != nil {
		opts.TLSConfig, opts.TLS, opts.TLSTimeout = o.tls, true, 5
	}
	if o.clusterName != "" {
		opts.Cluster = server.ClusterOpts{Name: o.clusterName, Host: o.clusterHost, Port: o.clusterPort,
			Username: "codemode", Password: o.token, ConnectRetries: 120}
		opts.Routes = o.routes
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("cluster: embedded NATS server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(15 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("cluster: the embedded NATS server did not start within 15s")
	}
	return srv, nil
}
