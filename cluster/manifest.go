package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// The tool manifest.
//
// Workers need the fronts' tool tree (a run moves between processes as
// its state, which resumes only on the same tree). Rather than give every
// worker the fronts' flags, a front publishes a manifest — what it builds
// its tools from, in a form the caller chooses — to the object store
// CM_TREES, and workers build their tree from it and follow its changes.
// A manifest can make a worker start programs (an MCP server's command),
// so it is authenticated with the state key that fronts and workers
// share: a client of the NATS servers without that key cannot forge one.

const (
	treesBucket  = "CM_TREES"
	manifestName = "latest"
)

// Errors of manifests.
var (
	ErrNoManifest     = errors.New("cluster: no front has published its tools (start codemode serve first)")
	ErrForgedManifest = errors.New("cluster: the published tool manifest is not authenticated by this state key")
)

func (n *Node) trees(ctx context.Context) (jetstream.ObjectStore, error) {
	return n.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: treesBucket, Replicas: n.cfg.Replicas})
}

func seal(key, manifest []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(manifest)
	return append(m.Sum(nil), manifest...)
}

func unseal(key, sealed []byte) ([]byte, error) {
	if len(sealed) < sha256.Size {
		return nil, ErrForgedManifest
	}
	m := hmac.New(sha256.New, key)
	m.Write(sealed[sha256.Size:])
	if !hmac.Equal(m.Sum(nil), sealed[:sha256.Size]) {
		return nil, ErrForgedManifest
	}
	return sealed[sha256.Size:], nil
}

// PublishManifest makes manifest the one workers build their tools from,
// authenticated with key (the state key).
func (n *Node) PublishManifest(ctx context.Context, key, manifest []byte) error {
	if len(key) == 0 {
		return errors.New("cluster: a manifest needs the state key")
	}
	obs, err := n.trees(ctx)
	if err != nil {
		return fmt.Errorf("cluster: bucket %s: %w", treesBucket, err)
	}
	if _, err := obs.PutBytes(ctx, manifestName, seal(key, manifest)); err != nil {
		return fmt.Errorf("cluster: publishing the tool manifest: %w", err)
	}
	return nil
}

// Manifest returns the published manifest, checked against key:
// ErrNoManifest when there is none, ErrForgedManifest when key did not
// make it.
func (n *Node) Manifest(ctx context.Context, key []byte) ([]byte, error) {
	obs, err := n.trees(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s: %w", treesBucket, err)
	}
	b, err := obs.GetBytes(ctx, manifestName)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, ErrNoManifest
	} else if err != nil {
		return nil, err
	}
	return unseal(key, b)
}

// WatchManifest calls f with the manifest each time one is published
// after the call (checked against key; of several published at once, f
// may see only the last), until ctx ends. A manifest key did not make is
// reported to f as ErrForgedManifest.
func (n *Node) WatchManifest(ctx context.Context, key []byte, f func([]byte, error)) error {
	obs, err := n.trees(ctx)
	if err != nil {
		return err
	}
	w, err := obs.Watch(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return err
	}
	// Updates are only noted here, and the manifest read by another
	// goroutine: reading it while the watcher waits to hand over its
	// next update timed out.
	changed := make(chan struct{}, 1)
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case info, ok := <-w.Updates():
				if !ok {
					return
				}
				if info != nil && !info.Deleted && info.Name == manifestName {
					select {
					case changed <- struct{}{}:
					default: // a read is due already, and sees this one
					}
				}
			}
		}
	}()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				b, err := obs.GetBytes(ctx, manifestName)
				if err != nil {
					if ctx.Err() == nil && len(changed) == 0 {
						// (A newer manifest replacing this one during
						// the read fails it; that one is read next.)
						f(nil, fmt.Errorf("cluster: reading the new tool manifest: %w", err))
					}
					continue
				}
				f(unseal(key, b))
			}
		}
	}()
	return nil
}
