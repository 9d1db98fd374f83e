package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/codemode-go/codemode/internal/secret"
	"golang.org/x/oauth2"
)

// tokenRecord is what a login stores for one server: the token, and what
// refreshing it takes (the token endpoint and the client).
type tokenRecord struct {
	// Server and URL say whose token it is. A record is used only for
	// the URL it was issued for: a config that now names another URL
	// does not send the old server's token to it.
	Server string `json:"server"`
	URL    string `json:"url"`

	TokenEndpoint string `json:"tokenEndpoint"`
	// Resource is the resource parameter (RFC 8707) the token was
	// granted for; refreshes name it too. Empty in records written
	// before it was kept: their refreshes name none.
	Resource  string `json:"resource,omitempty"`
	AuthStyle int    `json:"authStyle"` // oauth2.AuthStyle
	ClientID  string `json:"clientId"`
	// ClientSecret is set only for a client codemode registered
	// dynamically; a configured secret is read from the config.
	ClientSecret string `json:"clientSecret,omitempty"`

	// Scopes were granted; Pending are the ones the server later asked
	// for (403 insufficient_scope), which the next login requests too.
	Scopes  []string `json:"scopes,omitempty"`
	Pending []string `json:"pendingScopes,omitempty"`

	Token *oauth2.Token `json:"token"`
	Saved time.Time     `json:"saved"`
}

// tokenDir is where tokens are kept: dir when set, else the per-user
// configuration directory's tokens/ ($CODEMODE_CONFIG_DIR/tokens, or
// os.UserConfigDir()/codemode/tokens).
func tokenDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	root, err := secret.Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "tokens"), nil
}

// tokenFile is the file of a server's token: its name, for people, and a
// hash of its URL, so that two configs naming the same server name for
// different URLs keep separate tokens.
func tokenFile(dir, server, url string) string {
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(dir, server+"-"+hex.EncodeToString(sum[:6])+".json")
}

// loadToken reads a record. It returns (nil, nil) when there is none or
// it is for another URL.
func loadToken(path, url string) (*tokenRecord, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the stored token: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("the stored token %s is not a regular file: remove it and log in again", path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the stored token %s has mode %04o, open to group or others: chmod 600 %s, or remove it and log in again", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the stored token: %w", err)
	}
	var rec tokenRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		// The message of a JSON error could quote the file: say where.
		return nil, fmt.Errorf("the stored token %s is not valid JSON: remove it and log in again", path)
	}
	if rec.URL != url || rec.Token == nil || rec.Token.AccessToken == "" {
		return nil, nil
	}
	return &rec, nil
}

// saveToken writes a record atomically: a file of mode 0600 in a
// directory of mode 0700, renamed over the old one, so that a process
// reading it meanwhile sees the old record or the new, never half.
func saveToken(path string, rec *tokenRecord) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("storing the token: %w", err)
	}
	// MkdirAll leaves an existing directory as it is, and the umask may
	// have widened a new one: tokens are nobody else's business.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("storing the token: %w", err)
	}
	rec.Saved = time.Now().UTC().Truncate(time.Second)
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("storing the token: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("storing the token: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("storing the token: %w", err)
	}
	return nil
}

// modTime is a file's modification time, zero when it does not exist.
func modTime(path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}
