# The two commands a new machine needs:
#   make demo   runs the demo program against the built-in demo tools
#   make test   installs the pinned engine, then gofmt, vet, staticcheck
#               and the race-enabled test suite
SHELL := /bin/bash
WASM := internal/quickjs/quickjs.wasm
# The pinned hash lives in Go; the build refuses any other engine bytes.
WASM_SHA256 := $(shell sed -n 's/^const wasmSHA256 = "\([0-9a-f]*\)"/\1/p' internal/quickjs/abi.go)
# GitHub's REST API description, a large real spec for the tests. Only the
# one file is extracted: the package unpacks to 385 MB.
GITHUB_SPEC := testdata/large/api.github.com.json
OCTOKIT := @octokit/openapi@23.0.2
OCTOKIT_SHA512 := sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg==
# Figma's REST API description: a mid-sized OpenAPI 3.1 YAML document, so
# the openapi tests see YAML and 3.1 keywords on a real spec too.
FIGMA_SPEC := testdata/large/figma-openapi.yaml
FIGMA := @figma/rest-api-spec@0.43.0
FIGMA_SHA512 := sha512-sbFm28WM8MsawyLSYO9Ddne+8xytWU5D7oCOOWyzRvLpd9InFHihC37dQBVJVzAVyT7HpwYtU4wlm+ALogC38g==

.PHONY: all wasm specs demo test check vet staticcheck fmt-check gotest bench clean

all: wasm

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(WASM): node_modules/.package-lock.json internal/quickjs/abi.go
	cp node_modules/quickjs-wasi/quickjs.wasm $(WASM)
	@echo "$(WASM_SHA256)  $(WASM)" | sha256sum --check --quiet || { rm -f $(WASM); echo "quickjs.wasm does not match the pinned SHA-256" >&2; exit 1; }

wasm: $(WASM)

$(GITHUB_SPEC):
	scripts/npm-extract.sh $(OCTOKIT) $(OCTOKIT_SHA512) package/generated/api.github.com.json $@

$(FIGMA_SPEC):
	scripts/npm-extract.sh $(FIGMA) $(FIGMA_SHA512) package/openapi/openapi.yaml $@

specs: $(GITHUB_SPEC) $(FIGMA_SPEC)

demo: wasm
	go run ./cmd/codemode demo

test: wasm specs fmt-check vet staticcheck gotest

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet: wasm
	go vet ./...

staticcheck: wasm
	go tool staticcheck ./...

gotest: wasm
	go test -race -count=1 ./...

bench: wasm
	go test -run '^$$' -bench . -benchmem ./...

clean:
	rm -f $(WASM) $(GITHUB_SPEC) $(FIGMA_SPEC)
