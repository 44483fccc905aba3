# Switchyard — run `make help` for the targets.
#
# Two commands matter: `make run` starts the whole mesh on loopback and serves
# the OpenAI API at http://127.0.0.1:$(PORT); `make test` installs what the
# tests need (Debian packages, a Consul built from source) and runs them all.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Local stack settings are read from the environment or the command line by
# scripts/run-local.sh and scripts/bench.sh (see README "Configuration"):
# MODEL TOKENIZER EXECUTOR PREFILL DECODE ROUTERS ROUTER_MODE DISCOVERY PORT.
export MODEL TOKENIZER EXECUTOR ENGINE LLAMACPP_DECODE ENGINE_SLOTS LLAMA_SERVER_BIN PREFILL DECODE MAX_PREFILL MAX_DECODE PLANNER_PROFILE PLANNER_ARGS ROUTERS ROUTER_MODE DISCOVERY PORT BASE_PORT KV_HOST_BLOCKS KV_DISK_BLOCKS KVBM_S3 KVBM_S3_BUCKET KVBM_S3_CAPACITY
export TRACE NUM_BLOCKS SPEED RATE LIMIT OUT SIM_CONTEXT NO_BUILD LOADTEST_ARGS WORKER_ARGS ROUTER_ARGS FRONTEND_ARGS ROUTESIM_ARGS

SERVICES := frontend router prefill decode kvbm-controller planner
BIN      := $(CURDIR)/bin

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: build ## build and start the whole mesh; frontend at http://127.0.0.1:8000 (vars: MODEL TOKENIZER EXECUTOR ENGINE PREFILL DECODE ROUTERS ROUTER_MODE DISCOVERY PORT KV_HOST_BLOCKS KV_DISK_BLOCKS KVBM_S3)
	@scripts/run-local.sh

.PHONY: test
test: ## install test dependencies, then vet, race tests, integration tests (real Consul and Redis), buf checks, benchmark smoke run
	@scripts/test.sh

.PHONY: build
build: ## build every service binary and the single switchyard binary into bin/, version-stamped
	@scripts/build.sh $(SERVICES) switchyard supervisor

.PHONY: certs
certs: ## make a local CA and per-service certificates for mutual TLS (127.0.0.1, localhost) in CERTS (default ~/.cache/switchyard/certs); keeps what is current; see docs/security.md
	@cd libs/mesh && go run ./cmd/switchyard-certs $(if $(CERTS),-dir $(CERTS))

.PHONY: release
release: ## build each service's release: a static linux binary, a .tar.gz with its CHANGELOG, an OCI image, SHA256SUMS, into DIST (default dist/); vars: RELEASE="router decode" for some
	@go run ./cmd/release -out $(or $(DIST),dist) $(RELEASE)

.PHONY: nomad-up
nomad-up: ## release archives, then Consul and Nomad dev agents on loopback running every service's job from deploy/nomad; prints the frontend (vars: MODEL TOKENIZER NOMAD_LOCAL_DIR NOMAD_LOCAL_PORT NO_RELEASE)
	@scripts/nomad-local.sh up

.PHONY: nomad-down
nomad-down: ## stop what nomad-up started: the jobs, the Nomad and Consul agents, the artifact server
	@scripts/nomad-local.sh down

.PHONY: deps
deps: ## install Debian packages and build Consul (done by `make test` when missing)
	@scripts/deps.sh

.PHONY: generate
generate: ## regenerate gen/ from proto/ with the pinned buf and plugins
	@scripts/buf.sh generate

.PHONY: proto-check
proto-check: ## buf lint, generated code up to date, buf breaking against the previous commit
	@scripts/buf.sh check

.PHONY: bench
bench: ## replay a trace against a local mesh of sim workers, report in OUT (vars: TRACE DECODE ROUTER_MODE NUM_BLOCKS SPEED RATE LIMIT OUT KV_HOST_BLOCKS KV_DISK_BLOCKS); see docs/benchmarks.md
	@scripts/bench.sh

.PHONY: routesim
routesim: ## replay a trace on a virtual clock through the router's own decisions and simulated workers, seconds a trace (vars: TRACE NUM_BLOCKS RATE LIMIT SIM_CONTEXT ROUTESIM_ARGS); see docs/benchmarks.md
	@t=$${TRACE:-conversation}; case $$t in conversation | synthetic) t=../shared/traces/$${t}_trace.jsonl ;; esac; \
	go run ./services/router/cmd/routesim -trace "$$t" -limit $${LIMIT:-0} -rate $${RATE:-1} \
		-context $${SIM_CONTEXT:-131072} $${NUM_BLOCKS:+-num-blocks $$NUM_BLOCKS} $${ROUTESIM_ARGS:-}

# The chaos and soak runs need Consul (the cached build, else scripts/deps.sh
# builds it) and redis-server; see docs/chaos.md.
CHAOS_ENV = CONSUL_BIN=$${CONSUL_BIN:-$$(c=$${SWITCHYARD_CACHE:-$$HOME/.cache/switchyard}/consul-v1.14.11; [ -x "$$c" ] && echo "$$c" || scripts/deps.sh | tail -2 | head -1)} \
	REDIS_BIN=$${REDIS_BIN:-$$(command -v redis-server)}

.PHONY: chaos
chaos: ## kill, freeze and partition each part of a local mesh in turn under greedy load; table of lost/migrated/retried requests and index checks in OUT (default results/chaos-<date>.md); see docs/chaos.md
	@$(CHAOS_ENV) SWITCHYARD_CHAOS=1 CHAOS_OUT=$(abspath $(or $(OUT),results/chaos-$(shell date -u +%F).md)) \
		go test ./tests/chaos -run '^TestChaos$$' -count=1 -timeout 60m -v

.PHONY: soak
soak: ## mixed load on the chaos mesh without faults for SOAK (default 30m), every process's RSS, goroutines and fds sampled; report, CSV and SVG in OUT (default results/soak-<date>.md)
	@$(CHAOS_ENV) SWITCHYARD_SOAK=$(or $(SOAK),30m) SOAK_OUT=$(abspath $(or $(OUT),results/soak-$(shell date -u +%F).md)) \
		go test ./tests/chaos -run '^TestSoak$$' -count=1 -timeout 0 -v

.PHONY: gobench
gobench: ## run every Go benchmark for real (slow); numbers to compare, not assertions
	@go test -run '^$$' -bench . -benchmem $$(scripts/modules.sh pkgs)

.PHONY: runc-compare
runc-compare: ## single-stream greedy decode on stories260K against llama2.c run.c, side by side (vars: RUNC_PROMPT RUNC_STEPS RUNC_ROUNDS RUNC_SRC); see docs/benchmarks.md
	@scripts/runc-compare.sh

.PHONY: fuzz
fuzz: ## run each fuzz target, or those named in FUZZ ("FuzzA FuzzB"), for FUZZTIME (default 10s) each; see docs/development.md
	@scripts/fuzz.sh $${FUZZTIME:-10s} $${FUZZ:-}

.PHONY: clean
clean: ## remove build outputs
	rm -rf bin results

.PHONY: lint
lint: ## golangci-lint (pinned in tools/golangci-lint, curated in .golangci.yml) over every module, and the UCX packages with -tags ucx
	@scripts/lint.sh
