package cluster

import (
	"crypto/tls"
	"errors"
	"net"
	"net/url"
)

// embedded is the in-process NATS server, as the Node uses it.
type embedded interface {
	InProcessConn() (net.Conn, error)
	ClientURL() string
	Addr() net.Addr
	Shutdown()
	WaitForShutdown()
}

// serverOptions are the embedded server's settings, checked by embed.
type serverOptions struct {
	name, host  string
	port        int
	token       string
	storeDir    string
	tls         *tls.Config
	clusterName string // empty: no routes
	clusterHost string
	clusterPort int
	routes      []*url.URL
}

// errNoEmbedded is what Open says in a build without the embedded server
// when Config.URL is empty.
var errNoEmbedded = errors.New("cluster: this build has no embedded NATS server (it was built with -tags codemode_nonats): give the URL of a NATS server with JetStream (Config.URL, --nats URL), or use a build without that tag")
