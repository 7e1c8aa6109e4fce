# surfaced — see README.md. Every target works offline once modules are cached.
GO ?= go
PKGS := ./...
# The multi-process cluster suite runs after the rest, alone: its daemons are
# separate processes (built without -race) and their timing wants the cores.
# So do the in-process cluster tests of the root package: the pinned
# protoactor cluster races with itself in one process, so they are built
# only without -race.
UNIT_PKGS = $$($(GO) list ./... | grep -v /test/cluster)

.PHONY: build image test test-short bench lint proto proto-check demo web react-demo copilotkit-demo fuzz clean

# make build stamps the version and the commit; outside a git checkout it
# stamps nothing and the binary reports what the Go toolchain recorded, or
# "dev" (surfaced version).
BIN ?= bin/surfaced
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS = $(if $(VERSION),-X github.com/surfaced/surfaced.Version=$(VERSION)) $(if $(COMMIT),-X github.com/surfaced/surfaced.Commit=$(COMMIT))
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/surfaced

# The container image (docs/deploy.md): static binaries on an empty base,
# built with buildah (or podman, or docker); IMAGE, IMAGE_TAGS and
# IMAGE_ARCHIVE as deploy/image/build says.
image:
	GO=$(GO) VERSION=$(VERSION) COMMIT=$(COMMIT) ./deploy/image/build

# The test command of the README and of .ci/run.
test:
	./scripts/test-setup
	$(GO) vet $(PKGS)
	$(GO) vet -tags k8s ./membership ./cmd/surfaced
	$(GO) test -race -timeout 30m $(UNIT_PKGS)
	$(GO) test -timeout 30m -run InProcessCluster .
	$(GO) test -timeout 30m ./test/cluster

test-short:
	$(GO) test -short $(PKGS)

bench:
	./scripts/bench

# gofmt, go vet and staticcheck (pinned in tools/go.mod; deliberate
# exceptions are //lint:ignore lines with their reason), with and without the
# k8s build tag, the generated protobuf code checked against its sources, and
# deploy/ (scripts/lint-deploy: the systemd unit, the Kubernetes manifests).
STATICCHECK = $(GO) tool -modfile=tools/go.mod staticcheck
lint: proto-check
	@files=$$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path '*/node_modules/*'); \
	out=$$(gofmt -l $$files); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags k8s ./membership ./cmd/surfaced
	$(STATICCHECK) $(PKGS)
	$(STATICCHECK) -tags k8s ./membership ./cmd/surfaced
	GO=$(GO) ./scripts/lint-deploy

# Regenerate proto/ with buf and the local protoc-gen-go pinned in tools/go.mod.
proto:
	$(GO) tool -modfile=tools/go.mod buf lint
	$(GO) tool -modfile=tools/go.mod buf generate

# Fails, saying which file, when proto/ is not what `make proto` would make.
proto-check:
	GO=$(GO) ./scripts/proto-check

demo:
	$(GO) run ./cmd/surfaced run ./examples/surface-demo-agent

# The npm packages (web/client, web/react, web/agent) and the example apps
# (examples/react-app, examples/copilotkit-app), with the toolchain pinned in
# web/package-lock.json: rewrites the embedded
# gateway/internal/webui/static/surfaced.js and web/agent/dist (commit both),
# web/react/dist and the examples' dist.
web:
	@[ -d web/node_modules ] && [ ! web/package-lock.json -nt web/node_modules/.package-lock.json ] || (cd web && npm ci --no-audit --no-fund)
	cd web && node scripts/build.mjs

# The React example app on the demo agent: open the URL it prints.
react-demo: web
	$(GO) run ./cmd/surfaced run --web-root examples/react-app/dist ./examples/surface-demo-agent

# The CopilotKit example app (AG-UI) on the demo agent: open the URL it prints.
copilotkit-demo: web
	$(GO) run ./cmd/surfaced run --web-root examples/copilotkit-app/dist ./examples/surface-demo-agent

# Every fuzz target of the module, FUZZTIME each (.ci/run: 5s).
FUZZTIME ?= 10s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz

clean:
	rm -rf bin
