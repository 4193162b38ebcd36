GO      ?= go
export GO
BIN     := bin/raftmq
# raftmq version and commit, printed by `raftmq version`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.buildCommit=$(COMMIT)
PKGS    := ./...
export PATH := $(shell $(GO) env GOPATH)/bin:$(PATH)

.PHONY: all build test test-short lint proto demo clean fuzz console-screenshot

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/raftmq

proto:
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
	protoc --go_out=. --go_opt=paths=source_relative \
	       --go-grpc_out=. --go-grpc_opt=paths=source_relative api/raftmq.proto

# Unit and in-process cluster tests run in parallel; the tests that start
# real processes and containers run one package at a time so that their
# clusters do not compete for the two cores.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /integration)

# The unmodified RocketMQ Go client races with itself (its orderly
# consumer's processQueue reads a tree without the tree's lock), so the
# tests that run it run without -race; everything else runs with it.
RMQ_CLIENT_TESTS = ^(TestRocketMQ|TestComposeRocketMQ)

# scripts/gotest repeats what failed at the end of its output.
test: build lint
	scripts/gotest -race -count=1 -timeout 15m $(UNIT_PKGS)
	scripts/gotest -race -count=1 -p 1 -timeout 30m -skip '$(RMQ_CLIENT_TESTS)' ./integration/...
	scripts/gotest -count=1 -p 1 -timeout 20m -run '$(RMQ_CLIENT_TESTS)' ./integration

test-short:
	$(GO) test -short -count=1 $(PKGS)

# staticcheck is run at a pinned version through the module proxy, so that
# nothing needs installing and go.mod does not carry its dependencies.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

demo: build
	$(BIN) demo

# Screenshots of the web console (docs/console.md), taken by its browser test
# against an in-process group in headless Chromium (apt-get install -y chromium).
console-screenshot:
	RAFTMQ_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test ./broker/server/ -run '^(TestConsoleInBrowser|TestConsoleClusterView)$$' -count=1 -v

# Short runs of every fuzz target (scripts/fuzz finds them; longer: FUZZTIME=5m
# make fuzz; some: FUZZ_MATCH=remoting make fuzz).
FUZZTIME ?= 20s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz

clean:
	rm -rf bin

-include Makefile.docker Makefile.bench Makefile.chaos
