package enginebin

// The pinned engine build. Updating the engine means changing all three
// together (see README.md): the SHA-256 is what every source is checked
// against; the version and the integrity are what an npm fetch asks for
// and checks the tarball against before opening it.

// SHA256 is the hex SHA-256 of the pinned quickjs.wasm (npm quickjs-wasi
// 3.7.0, QuickJS-NG 0.18.0). The Makefile checks its copy against it, the
// per-user cache is keyed by it, and no source whose bytes differ is used.
const SHA256 = "c0bd8f296e18cf074969f6401b9ecb72609a1323818ec2b9bf7a8f8d740d1363"

// PackageVersion is the npm quickjs-wasi version the engine comes from; it
// must equal the version package.json pins.
const PackageVersion = "3.7.0"

// Integrity is the npm integrity (SHA-512 of the tarball) package-lock.json
// records for quickjs-wasi@PackageVersion. An npm fetch checks the tarball
// against it before extracting anything, as npm ci does.
const Integrity = "sha512-6nOShBtCglrQL6yH+hptIfEdA1WlSmvY/Mm5Ypn9IvtsaDsrYIg8x+xoIXQt02w66a0f1eLTAj1lhfgAbJ4WVw=="
