# clusterapp — `make help` lists the targets.
SHELL   := /bin/bash
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The binary reports the version of the package it ships in (`clusterapp --version`):
# packaging/version maps the describe string as packaging/build does (and is idempotent).
PKG_VERSION := $(shell packaging/version '$(VERSION)' 2>/dev/null || echo '$(VERSION)')
LDFLAGS := -s -w -X main.version=$(PKG_VERSION)
# Every timestamp in the packages (file mtimes, the changelog date) is the last commit's, so two
# builds of one commit give identical packages (reproducible-builds.org's SOURCE_DATE_EPOCH).
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH
BIN     := bin
DIST    := dist
# Every test run is bounded; the integration tests boot real systemd. Packages are tested one at
# a time (-p 1): the packaging and systemd suites each load the same 2 CPUs with real traffic.
TEST_TIMEOUT ?= 30m

.PHONY: help build test test-deps test-unit test-integration run bench bench-start bench-stack check fmt vet tidy units docs package deb rpm clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

# bin/clusterapp-docs is bin/clusterapp with the man page generator (`-tags mandocs`), which
# packaging/build runs: its renderer's initialisers cost every start of the shipped binary ~2 ms.
build: ## build bin/clusterapp, clusterapp-worker, clusterapp-docs, clusterapp-load, clusterapp-bare and clusterapp-hello (docs/own-handler.md)
	@echo ">> building $(PKG_VERSION)"
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/clusterapp ./cmd/clusterapp
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/clusterapp-worker ./cmd/clusterapp-worker
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -tags mandocs -o $(BIN)/clusterapp-docs ./cmd/clusterapp
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/clusterapp-load ./cmd/clusterapp-load
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/clusterapp-bare ./cmd/clusterapp-bare
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/clusterapp-hello ./cmd/clusterapp-hello

test: test-deps build check ## every test: static checks, unit, process, and the suite under real systemd (root; installs the tools it needs)
	@echo ">> go test (integration tests need root and systemd; they skip with a reason otherwise)"
	$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./...

test-deps: ## install the tools the tests need (root, apt-get), or name the missing ones and fail
	scripts/test-deps

test-unit: ## unit and process tests only (no systemd, no root)
	$(GO) test -count=1 -short ./...

test-integration: build ## only the suite under real systemd in the sandbox (root)
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v ./systemd/

run: build ## run the real suite: a private systemd serving 127.0.0.1:8080 (root; Ctrl-C stops it)
	scripts/sandbox run

# Not part of `make test`: it reports numbers and fails only when a run could not be made.
bench: build ## measure the pool (1-16 workers) against one process, bare net/http, nginx, Node cluster and PM2, one process against bare net/http side by side, a spike, worker faults, the start and a replacement in a sandbox (root, ~15 min); writes docs/benchmarks.md and .svg, keeps the run in bin/bench-runs/
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/clusterapp-bench ./cmd/clusterapp-bench
	@# nginx, the fast-path anchor, as make test installs it; without it the page says it was skipped
	-@scripts/test-deps nginx
	@scripts/node-anchor $(BIN)/node-anchor
	$(BIN)/clusterapp-bench -repo . -out docs

# Trees to compare (checkouts with `make build` done), comma-separated; each gets ROUNDS cold starts.
TREES ?=
ROUNDS ?= 10
# What `systemctl start` starts; empty: both shipped sockets, as make bench.
UNITS ?=
bench-start: build ## cold starts of TREES=dir,dir (checkouts, built) taking turns in one box, each beside bare net/http's (root; ROUNDS=10, UNITS=)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/clusterapp-bench ./cmd/clusterapp-bench
	$(BIN)/clusterapp-bench -repo . -box bench-start -start-ab '$(TREES)' -start-ab-rounds '$(ROUNDS)' $(if $(UNITS),-start-ab-units '$(UNITS)')

bench-stack: build ## one worker vs a bare net/http program on loopback, side by side (~1 min; scripts/bench-stack)
	scripts/bench-stack

check: fmt vet tidy units ## static checks: gofmt, go vet, go mod tidy, unit verification, hardening budget

fmt:
	@echo ">> gofmt"
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	@echo ">> go vet"
	$(GO) vet ./...
	$(GO) vet -tags mandocs ./cmd/clusterapp

tidy:
	@echo ">> go mod tidy"
	$(GO) mod tidy -diff

# The worker's and the metrics exporter's exposure must stay at or below 2.0
# (`systemd-analyze security`).
units: build
	@echo ">> systemd-analyze verify and security"
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	  install -D -m755 $(BIN)/clusterapp $$tmp/usr/bin/clusterapp && \
	  install -D -m755 $(BIN)/clusterapp-worker $$tmp/usr/libexec/clusterapp-worker && \
	  cp systemd/*.socket systemd/*.service systemd/*.target $$tmp/ && \
	  sed -i "s#/usr/bin/clusterapp#$$tmp/usr/bin/clusterapp#; s#/usr/libexec/clusterapp-worker#$$tmp/usr/libexec/clusterapp-worker#" $$tmp/*.service && \
	  SYSTEMD_LOG_LEVEL=warning systemd-analyze verify $$tmp/clusterapp.socket $$tmp/clusterapp-metrics.socket $$tmp/clusterapp-metrics.service $$tmp/clusterapp.target $$tmp/clusterapp-first.target $$tmp/clusterapp.service $$tmp/clusterapp-worker@.service && \
	  systemd-analyze security --offline=true --threshold=20 $$tmp/clusterapp-worker@.service | tail -1 && \
	  systemd-analyze security --offline=true --threshold=20 $$tmp/clusterapp-metrics.service | tail -1

docs: build ## regenerate the variable tables in README.md and docs/operations.md
	@echo ">> README.md and docs/operations.md variable tables"
	@$(BIN)/clusterapp config --markdown > .vars.md && \
	  awk 'BEGIN{while((getline l < ".vars.md")>0) t=t l "\n"} /<!-- vars:begin -->/{print; printf "%s", t; skip=1; next} /<!-- vars:end -->/{skip=0} !skip' README.md > README.md.new && \
	  mv README.md.new README.md && rm -f .vars.md
	@$(BIN)/clusterapp config --markdown-invalid > .invalid.md && \
	  awk 'BEGIN{while((getline l < ".invalid.md")>0) t=t l "\n"} /<!-- invalid:begin -->/{print; printf "%s", t; skip=1; next} /<!-- invalid:end -->/{skip=0} !skip' docs/operations.md > docs/operations.md.new && \
	  mv docs/operations.md.new docs/operations.md && rm -f .invalid.md

# packaging/build generates the environment file from the binary and runs nfpm (go tool nfpm).
package: build ## build $(DIST)/*.deb and $(DIST)/*.rpm (version from git describe; packaging/README.md)
	VERSION='$(VERSION)' packaging/build $(BIN) $(DIST) deb rpm

deb: build ## build $(DIST)/*.deb only
	VERSION='$(VERSION)' packaging/build $(BIN) $(DIST) deb

rpm: build ## build $(DIST)/*.rpm only
	VERSION='$(VERSION)' packaging/build $(BIN) $(DIST) rpm

clean: ## remove build output
	rm -rf $(BIN) dist
