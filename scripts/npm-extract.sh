#!/usr/bin/env bash
# npm-extract.sh PACKAGE@VERSION SHA512-INTEGRITY PATH-IN-TARBALL DEST
#
# Fetches one file out of an npm package tarball without installing the
# package (some, like @octokit/openapi, unpack to hundreds of megabytes),
# after checking the tarball against the pinned integrity hash.
set -euo pipefail
pkg=$1 integrity=$2 inner=$3 dest=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
tgz=$(ls "$tmp"/*.tgz)
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
  echo "npm-extract: $pkg integrity mismatch: got $got, want $integrity" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$tmp" "$inner"
mkdir -p "$(dirname "$dest")"
mv "$tmp/$inner" "$dest"
