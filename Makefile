# meshlaunch build, test and self-check. Run `make help` for the targets.

GO         ?= go
GOFMT      ?= $(shell $(GO) env GOROOT)/bin/gofmt
STATICCHECK_VERSION := v0.8.2
STATICCHECK ?= $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin/staticcheck

BIN        := bin/meshlaunch
# Override with `make build VERSION=v1.2.3`; without git (or outside a
# repository) the binary reports "dev".
VERSION    ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X main.version=$(VERSION)

.PHONY: all build test test-long soak check lint fuzz demo image e2e-slurm bench fmt-check tidy-check vet staticcheck static-check tools clean help

all: build

help:
	@echo "make build   static binary at $(BIN) (CGO_ENABLED=0, version $(VERSION))"
	@echo "make test    go test -race -count=1 ./..."
	@echo "make test-long  the long fault scenarios (minute-long outages, idle through the Ingress timeout; root)"
	@echo "make soak    DURATION=10m: mixed traffic and websocket kills through one sidecar; prints goroutines, fds, RSS (root)"
	@echo "make demo    a simulated cluster and a remote job joined to it (root; network namespaces)"
	@echo "make image   container image $(IMAGE) from deploy/Containerfile (podman or docker)"
	@echo "make e2e-slurm  batch jobs on a real one-node SLURM join the simulated cluster (root; slurm-wlm, munge)"
	@echo "make fuzz    every fuzz target for FUZZTIME (default 10s) each"
	@echo "make bench   side-by-side benchmark; writes docs/benchmarks.md (root, ~6 min)"
	@echo "make check   gofmt, go mod tidy, go vet, staticcheck, test, build, static-binary check"
	@echo "make tools   install staticcheck $(STATICCHECK_VERSION) if missing"
	@echo "make clean   remove bin/"

# Always rebuilt: go build is incremental, and make cannot see Go dependencies.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/meshlaunch

test:
	$(GO) test -race -count=1 ./...

# Tests named TestLong* skip unless MESHLAUNCH_LONG=1: fault scenarios that
# take minutes (a 60 s carrier outage, a tunnel idle through the Ingress's
# idle timeout). Root, like the rest of the namespace tier.
test-long: build
	MESHLAUNCH_LONG=1 $(GO) test -race -count=1 -timeout 45m -run 'TestLong' ./...

# The bounded soak (root): several launchers, one sidecar, a traffic mix and
# periodic websocket kills for DURATION; it fails unless the sidecar's
# goroutines, file descriptors and RSS come back near where they started.
DURATION ?= 10m
soak: build
	MESHLAUNCH_SOAK=$(DURATION) $(GO) test -count=1 -timeout 3h -v -run TestSoak ./integration/soak/

# The container image (deploy/Containerfile: FROM scratch, the static binary,
# uid 65532), built with podman or docker, whichever is installed.
IMAGE            ?= meshlaunch:dev
CONTAINER_ENGINE ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)

image: build
	@if [ -z "$(CONTAINER_ENGINE)" ]; then \
		echo "make image: neither podman nor docker is installed; install one, or set CONTAINER_ENGINE=/path/to/engine"; exit 1; fi
	$(CONTAINER_ENGINE) build -f deploy/Containerfile --build-arg VERSION=$(VERSION) -t $(IMAGE) .

# Batch jobs on a real one-node SLURM (Debian's slurm-wlm and munge, run in
# the simulated cluster's node namespace) join the cluster through
# `meshlaunch run`; docs/hpc.md. Root.
e2e-slurm: build
	MESHLAUNCH_E2E_SLURM=1 $(GO) test -count=1 -v ./integration/slurm/

# The side-by-side benchmark (root, ~7 minutes): installs the Debian packages
# it compares against (iperf3, slirp4netns, passt: .ci/deps) if missing and
# writes docs/benchmarks.md and docs/benchmarks.svg.
bench: build
	bash .ci/deps
	MESHLAUNCH_BENCH=1 $(GO) test -count=1 -timeout 30m -v -run TestBench ./integration/bench/

# Every fuzz target for FUZZTIME each (go runs one -fuzz target per
# invocation); seeds alone run as unit tests in `make test`. Minimizing
# new inputs is off by default: when it runs into the end of -fuzztime, go
# test fails with "context deadline exceeded" although nothing was found
# (seen with the slower FuzzServerMessages); raise FUZZMINTIME to minimize.
FUZZTIME ?= 10s
FUZZMINTIME ?= 0
FUZZ_TARGETS := \
	policy:FuzzCheckDifferential policy:FuzzParseRule \
	wsproxy:FuzzServerMessages wsproxy:FuzzParseServerURL \
	tunnel:FuzzParseLocal tunnel:FuzzParseRemote tunnel:FuzzParseSocks \
	launcher:FuzzParsePublish \
	sidecar:FuzzParsePeer sidecar:FuzzParsePort \
	dnsproxy:FuzzParseResolvConf

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "== $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) ./$$pkg/; \
	done

# A simulated cluster and a remote job joined to it, in network namespaces
# on this machine (root). Installs the Debian packages it needs if missing.
demo: build
	bash .ci/deps
	bash deploy/demo.sh $(BIN)

# Order matters: cheap static checks first, then tests, then the release build.
check: lint test static-check

# The static checks alone (what `make check` runs before the tests).
lint: fmt-check tidy-check vet staticcheck

fmt-check:
	@echo "gofmt -l ."; out="$$($(GOFMT) -l .)"; \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$out"; exit 1; fi

tidy-check:
	$(GO) mod tidy -diff

vet:
	$(GO) vet ./...

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

# Tools the checks use, installed into GOPATH/bin when missing.
tools: $(STATICCHECK)

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# A CGO_ENABLED=0 build links no C library, so the binary runs on any Linux
# node without matching its libc.
static-check: build
	@echo "checking that $(BIN) is static"
	@$(GO) version -m $(BIN) | grep -Eq '^[[:space:]]*build[[:space:]]+CGO_ENABLED=0$$' || { echo "$(BIN) was not built with CGO_ENABLED=0"; exit 1; }

clean:
	rm -rf bin
