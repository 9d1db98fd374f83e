//go:build codemode_nonats

package cluster

// EmbeddedServer says whether this build can start an embedded NATS
// server (Config.URL empty). This one, built with the tag
// codemode_nonats, cannot: it joins only a NATS server of its own.
const EmbeddedServer = false

func startServer(serverOptions) (embedded, error) { return nil, errNoEmbedded }
