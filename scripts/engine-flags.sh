#!/usr/bin/env bash
# engine-flags.sh measures what the engine's build flags and the
# WebAssembly compiler cost, on the cases in
# internal/quickjs/testdata/engine-cases.txt (BENCHMARKS.md, "Where compute
# time goes").
#
#   scripts/engine-flags.sh QUICKJS_NG_DIR [ROUNDS]
#
# QUICKJS_NG_DIR is a checkout of https://github.com/quickjs-ng/quickjs.
# It builds scripts/engine-flags/harness.c with that source natively (gcc
# -O2) and for wasm32-wasi at -O2 and at -Oz (the latter also through
# binaryen's wasm-opt -Oz, as the pinned engine is built), then runs each
# build ROUNDS times (default 3), alternating: under wazero (the version in
# go.mod, with its default compiler) and, when node is on PATH, under V8.
# Debian packages: clang-22 (or another clang with the wasm32 target),
# lld-22, libclang-rt-22-dev-wasm32, wasi-libc, and binaryen for wasm-opt.
# The pinned engine's own numbers on the same cases come from
#   go test ./internal/quickjs -run '^$' -bench EngineCases
set -euo pipefail

src=${1:?usage: scripts/engine-flags.sh QUICKJS_NG_DIR [ROUNDS]}
rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
cases=$root/internal/quickjs/testdata/engine-cases.txt
harness=$root/scripts/engine-flags/harness.c
sysroot=${WASI_SYSROOT:-/usr}
for f in quickjs.c libregexp.c libunicode.c dtoa.c; do
	[[ -f $src/$f ]] || { echo "engine-flags: $src has no $f: not a quickjs-ng checkout" >&2; exit 2; }
done
clang=
for c in clang-22 clang-21 clang-20 clang-19 clang; do
	if command -v "$c" >/dev/null; then clang=$c; break; fi
done
[[ -n $clang ]] || { echo "engine-flags: no clang on PATH (Debian: clang-22 lld-22 libclang-rt-22-dev-wasm32 wasi-libc)" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
qjs=("$src/quickjs.c" "$src/libregexp.c" "$src/libunicode.c" "$src/dtoa.c" "$harness")

gcc -O2 -D_GNU_SOURCE -I"$src" "${qjs[@]}" -lm -o "$out/native" 2>/dev/null
for opt in O2 Oz; do
	"$clang" --target=wasm32-wasi --sysroot="$sysroot" -"$opt" -flto -D_GNU_SOURCE \
		-D_WASI_EMULATED_PROCESS_CLOCKS -D_WASI_EMULATED_SIGNAL -I"$src" "${qjs[@]}" \
		-lwasi-emulated-process-clocks -lwasi-emulated-signal -Wl,-z,stack-size=1048576 \
		-o "$out/$opt.wasm" 2>/dev/null
done
builds=(O2 Oz)
if command -v wasm-opt >/dev/null; then
	wasm-opt -Oz "$out/Oz.wasm" -o "$out/Oz-wasm-opt.wasm"
	builds+=(Oz-wasm-opt)
fi
(cd "$root" && go build -o "$out/wazero" github.com/tetratelabs/wazero/cmd/wazero)
cat >"$out/v8.mjs" <<'JS'
import { WASI } from 'node:wasi'
import { readFileSync } from 'node:fs'
const wasi = new WASI({ version: 'preview1', args: ['harness', process.argv[3]] })
const mod = await WebAssembly.compile(readFileSync(process.argv[2]))
wasi.start(await WebAssembly.instantiate(mod, wasi.getImportObject()))
JS

echo "$clang: $("$clang" --version | head -1); $(ls -l "$out"/*.wasm | awk '{printf "%s %s  ", $9, $5}' | sed "s#$out/##g")"
for ((r = 1; r <= rounds; r++)); do
	"$out/native" "native" <"$cases"
	for b in "${builds[@]}"; do
		"$out/wazero" run "$out/$b.wasm" "wazero-$b" <"$cases"
		if command -v node >/dev/null; then
			node --no-warnings "$out/v8.mjs" "$out/$b.wasm" "v8-$b" <"$cases"
		fi
	done
done
