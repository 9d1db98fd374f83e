#!/usr/bin/env bash
# engine-fetch.sh [--check | --write]
#
# Re-derives the committed engine, internal/enginebin/quickjs.wasm, and its
# LICENSE from the npm registry: npm pack of the package and version
# PROVENANCE names, the tarball checked against PROVENANCE's integrity
# before anything is extracted, the engine against its SHA-256.
#
#   --check  (the default; make engine-check) fail unless the committed
#            files are byte-identical to the registry's
#   --write  replace the committed files with the registry's and print the
#            engine's SHA-256 when it differs from PROVENANCE's (updating
#            the engine; see internal/enginebin/README.md)
#
# Needs npm, openssl and the network; nothing else in the build does.
set -euo pipefail
mode=${1:---check}
case $mode in
  --check|--write) ;;
  *) echo "usage: $0 [--check | --write]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
dir=internal/enginebin
field() { sed -n "s/^$1: //p" "$dir/PROVENANCE"; }
pkg=$(field package) version=$(field version) integrity=$(field integrity)
sha256=$(field sha256) inner=$(field file)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Run outside the project, so no package.json or workspace plays a part.
(cd "$tmp" && npm pack --silent --loglevel=error "$pkg@$version" >/dev/null)
tgz=$(ls "$tmp"/*.tgz)
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | openssl base64 -A)"
if [ "$got" != "$integrity" ]; then
  echo "engine-fetch: $pkg@$version from the registry has integrity $got, PROVENANCE pins $integrity" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$tmp" "$inner" package/LICENSE
got=$(openssl dgst -sha256 -r "$tmp/$inner" | cut -d' ' -f1)
if [ "$mode" = --write ]; then
  cp "$tmp/$inner" "$dir/quickjs.wasm"
  cp "$tmp/package/LICENSE" "$dir/LICENSE"
  echo "engine-fetch: wrote $dir/quickjs.wasm and $dir/LICENSE from $pkg@$version"
  [ "$got" = "$sha256" ] || echo "engine-fetch: its SHA-256 is $got: put that in $dir/PROVENANCE and SHA256 in $dir/pin.go"
  exit 0
fi
if [ "$got" != "$sha256" ]; then
  echo "engine-fetch: $inner in $pkg@$version has SHA-256 $got, PROVENANCE pins $sha256" >&2
  exit 1
fi
status=0
for pair in "$inner:quickjs.wasm" "package/LICENSE:LICENSE"; do
  from=${pair%%:*} to=$dir/${pair#*:}
  if ! cmp -s "$tmp/$from" "$to"; then
    echo "engine-fetch: $to differs from $from in $pkg@$version; restore it with: $0 --write" >&2
    status=1
  fi
done
[ $status = 0 ] && echo "engine-fetch: $dir/quickjs.wasm and LICENSE are byte-identical to $pkg@$version from the registry"
exit $status
