package enginebin

// The pinned engine build. Updating the engine means changing these, the
// committed quickjs.wasm, LICENSE and PROVENANCE together (see README.md).

// SHA256 is the hex SHA-256 of the pinned quickjs.wasm (npm quickjs-wasi
// 3.7.0, QuickJS-NG 0.18.0). The committed file, the bytes a host passes
// and the file $CODEMODE_ENGINE_WASM names are all checked against it, and
// no bytes that differ are used.
const SHA256 = "c0bd8f296e18cf074969f6401b9ecb72609a1323818ec2b9bf7a8f8d740d1363"

// PackageVersion is the npm quickjs-wasi version the engine comes from.
const PackageVersion = "3.7.0"

// Integrity is the npm integrity (SHA-512 of the tarball) of
// quickjs-wasi@PackageVersion, which scripts/engine-fetch.sh checks the
// registry's tarball against before extracting the engine from it.
const Integrity = "sha512-6nOShBtCglrQL6yH+hptIfEdA1WlSmvY/Mm5Ypn9IvtsaDsrYIg8x+xoIXQt02w66a0f1eLTAj1lhfgAbJ4WVw=="
