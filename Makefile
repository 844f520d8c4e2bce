# giouring links to syscall.mmap with go:linkname, which Go >= 1.23 refuses
# unless the linker check is off. Every go command here needs it; so do you
# when you call go yourself:  export GOFLAGS=-ldflags=-checklinkname=0
export GOFLAGS := -ldflags=-checklinkname=0

BIN     := bin/server
PORT    ?= 8080
BACKEND ?= auto
ARGS    ?=

.PHONY: build run test test-short vet fmt fuzz bench clean

build:
	go build -o $(BIN) ./cmd/server

# Serves the bundled sample site on :$(PORT). Ctrl-C prints the counters.
run: build
	./$(BIN) --backend=$(BACKEND) --port $(PORT) --dir ./www $(ARGS)

# All tests under the race detector; the fuzz seed corpora run as tests.
test: vet
	go test -race -count=1 -timeout 8m ./...

test-short:
	go test -count=1 ./...

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Runs each fuzz target for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz:
	go test -run XXX -fuzz FuzzParseRequest -fuzztime $(FUZZTIME) ./core/

bench:
	go test -run XXX -bench . -benchmem ./core/

clean:
	rm -rf bin
