#!/usr/bin/env bash
# npm-extract.sh PACKAGE@VERSION SHA512-INTEGRITY PATH-IN-TARBALL DEST [PATH DEST]...
#
# Fetches files out of an npm package tarball without installing the
# package (some, like @octokit/openapi, unpack to hundreds of megabytes),
# after checking the tarball against the pinned integrity hash. A PATH of
# "-" keeps the verified tarball itself at DEST.
set -euo pipefail
pkg=$1 integrity=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
tgz=$(ls "$tmp"/*.tgz)
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
  echo "npm-extract: $pkg integrity mismatch: got $got, want $integrity" >&2
  exit 1
fi
while [ $# -ge 2 ]; do
  inner=$1 dest=$2
  shift 2
  mkdir -p "$(dirname "$dest")"
  if [ "$inner" = - ]; then
    cp "$tgz" "$dest"
    continue
  fi
  tar -xzf "$tgz" -C "$tmp" "$inner"
  mv "$tmp/$inner" "$dest"
done
