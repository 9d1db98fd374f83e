//go:build !unix

package quickjs

import "io/fs"

// checkCacheFile accepts any owner and mode. On Windows, who may write a
// file is in its ACL, not in the permission bits Go reports, and the
// per-user cache directory (%LocalAppData%) is its user's alone; the MACs
// still catch entries changed by anyone without the key.
func checkCacheFile(string, fs.FileInfo) error { return nil }
