//go:build !unix

package secret

import "io/fs"

// checkFile accepts any owner and mode: on Windows a file's permission
// bits say only whether it is read-only, and who may read or replace it
// is in its ACL, which the per-user configuration directory
// (%AppData%) already restricts to its user.
func checkFile(string, fs.FileInfo) error { return nil }

// checkDir accepts any directory, for checkFile's reason.
func checkDir(string, string) error { return nil }
