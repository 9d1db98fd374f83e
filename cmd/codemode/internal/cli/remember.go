package cli

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// A suspend directory remembers the flags its run was started with, so
// that "codemode resume DIR" needs none: DIR/flags.json holds the flags of
// run that resume takes too, as they were given (paths made absolute, so
// a resume from another directory finds the same files). They are names
// and paths only: credentials stay in the environment variables the
// flags name. A flag given to resume replaces the recorded one.
//
// The file is authenticated with the state key, as the state is: whoever
// can write to DIR (someone answering calls in DIR/results) must not be
// able to change the servers a resume starts or the policy it applies.
const flagsFile = "flags.json"

// remembered are the flags of run that resume applies from DIR/flags.json,
// and whether each holds paths to make absolute. The limits are not here:
// they travel in the state.
var remembered = map[string]bool{
	"config": true, "openapi": true, "state-key-file": true, "run-store": true, "cache-dir": true,
	"demo-tools": false, "base-url": false, "bearer-env": false, "basic-env": false, "apikey-env": false,
	"require-all": false, "connect-timeout": false, "call-timeout": false, "log-level": false,
	"policy": false, "no-cache": false, "pretty": false,
}

// savedFlags is DIR/flags.json.
type savedFlags struct {
	// Flags are [name, value] pairs in the order given; a repeatable flag
	// appears once per value.
	Flags [][2]string `json:"flags"`
	// MAC authenticates Flags with the state key (HMAC-SHA256, hex).
	MAC string `json:"mac"`
}

// givenFlags lists the remembered flags set on fs's command line.
func givenFlags(fs *flag.FlagSet) ([][2]string, error) {
	var out [][2]string
	var err error
	fs.Visit(func(f *flag.Flag) {
		paths, ok := remembered[f.Name]
		if !ok || err != nil {
			return
		}
		values := []string{f.Value.String()}
		if m, isMulti := f.Value.(*multiFlag); isMulti {
			values = *m
		}
		for _, v := range values {
			if paths && v != "" {
				if v, err = absPath(f.Name, v); err != nil {
					return
				}
			}
			out = append(out, [2]string{f.Name, v})
		}
	})
	return out, err
}

// absPath makes a path flag's value absolute; --openapi's is PATH[=ns].
func absPath(name, v string) (string, error) {
	path, ns, hasNS := "", "", false
	if name == "openapi" {
		path, ns, hasNS = strings.Cut(v, "=")
	} else {
		path = v
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("--%s %s: %w", name, v, err)
	}
	if hasNS {
		return abs + "=" + ns, nil
	}
	return abs, nil
}

// flagsMAC authenticates a flag list.
func flagsMAC(key []byte, flags [][2]string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("codemode suspend-dir flags v1\x00"))
	b, _ := json.Marshal(flags)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}

// saveFlags writes DIR/flags.json.
func saveFlags(dir string, key []byte, flags [][2]string) error {
	if flags == nil {
		flags = [][2]string{}
	}
	return writeFileAtomic(filepath.Join(dir, flagsFile), mustJSON(savedFlags{Flags: flags, MAC: flagsMAC(key, flags)}))
}

// loadFlags reads DIR/flags.json, unauthenticated: the caller checks it
// with checkFlags once it knows the key. A directory without one (made
// by an older codemode) gives none.
func loadFlags(dir string) (*savedFlags, error) {
	name := filepath.Join(dir, flagsFile)
	b, err := readAnswer(name) // a regular file of bounded size
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var sf savedFlags
	if err := json.Unmarshal(b, &sf); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return &sf, nil
}

// applyFlags sets on fs the recorded flags the command line did not give.
func applyFlags(fs *flag.FlagSet, saved *savedFlags) error {
	if saved == nil {
		return nil
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, nv := range saved.Flags {
		if _, ok := remembered[nv[0]]; !ok || given[nv[0]] || fs.Lookup(nv[0]) == nil {
			continue
		}
		if err := fs.Set(nv[0], nv[1]); err != nil {
			return fmt.Errorf("%s: --%s %s: %v", flagsFile, nv[0], nv[1], err)
		}
	}
	return nil
}

// checkFlags verifies the recorded flags with the state key.
func checkFlags(dir string, key []byte, saved *savedFlags) error {
	if saved == nil || hmac.Equal([]byte(flagsMAC(key, saved.Flags)), []byte(saved.MAC)) {
		return nil
	}
	return fmt.Errorf("%s was changed since the run was suspended, or made with another --state-key-file; "+
		"remove it and give the run's flags (--config, --openapi, --demo-tools, --policy) yourself", filepath.Join(dir, flagsFile))
}
