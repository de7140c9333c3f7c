# Front door. `make demo` runs the demo scenario in the lab; `make test` runs
# every test (unit, C, and end to end in the lab). Both install what they need.
# Test tiers (docs/contributing.md): `make check` (ruff and the pure-Python
# tests, seconds), `make unit` (check plus the toolchain tests: the agent's
# build, fuzz smoke, flowgen, Open vSwitch sandboxes, xen-patches checks),
# `make test` (everything, the lab included).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
SELENA := $(VENV)/bin/selena
TDF ?= 10

.PHONY: all deps test unit check lint demo bench bench-bandwidth reproduce-star reproduce-fattree \
	reproduce-fct reproduce-qjump clean

all: test

# Host prerequisites: Debian/Ubuntu packages plus a virtualenv with selena.
deps: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	./.ci/host-deps
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	# A second extensionless script is a second __main__ for mypy: checked alone.
	$(VENV)/bin/mypy scripts/lab-thresholds

# No C build, no fuzzers, no Open vSwitch, no lab.
check: lint
	$(VENV)/bin/pytest -q -m 'not lab and not toolchain'

# check, then the tests that need the C toolchain or Open vSwitch.
unit: check
	$(VENV)/bin/pytest -q -m 'toolchain and not lab'

# Regenerate tests/data/plans/, the committed `selena plan` output of every
# shipped scenario that tests/test_plan_snapshots.py compares with, when a
# change to the plans is meant; commit the copies with the change.
.PHONY: plan-snapshots
plan-snapshots: deps
	$(VENV)/bin/python scripts/update-plan-snapshots

# Builds what the lab boots (cached by input hash), then every test: lint,
# unit, the C checks of xen-patches, and the end-to-end lab tests. The lab
# build runs in the background (logged to build/lab-build.log) while lint
# and the tests outside the lab run, then the lab tests (scripts/make-test).
# The Debian lab tests' scenario names its variant and so the debian templates.
test: deps
	SELENA=$(SELENA) PYTEST=$(VENV)/bin/pytest LINT='make --no-print-directory lint' \
		LAB_BUILD_ARGS='--scenario scenarios/debian_memcached.py' scripts/make-test

# Lab tests that deploy tens of guests (a switch of 40 ports): long, so
# outside make test, like the reproductions.
.PHONY: test-scale
test-scale: deps
	$(SELENA) lab build
	$(VENV)/bin/pytest -v -m scale

demo: deps
	$(SELENA) lab build
	$(SELENA) lab demo --tdf $(TDF)

bench: deps
	$(VENV)/bin/python scenarios/bench_plan.py
	$(SELENA) lab build
	$(SELENA) lab bench
	$(SELENA) lab bench-deploy
	$(SELENA) lab bench-control

# Issue 13 item 7: the highest faithful link rate, Mininet vs selena per TDF.
# Long (about half an hour in the lab); not part of `make test`.
bench-bandwidth: deps
	$(SELENA) lab build
	$(SELENA) lab bench-bandwidth --tdfs $(BANDWIDTH_TDFS)

# SELENA's Figures 4 and 5 (star topology), scaled to the lab: a TDF sweep
# beside Mininet on the same Dom0. Long; not part of `make test`.
STAR_TDFS ?= 1,5,10
BANDWIDTH_TDFS ?= 5,10,20
reproduce-star: deps
	$(SELENA) lab build
	$(SELENA) lab run -- selena sweep scenarios/star_throughput.py --tdf $(STAR_TDFS) \
		--baseline mininet --out build/results/star

# SELENA's Figure 6 and Tables 2-3 (half a k=4 fat tree, flow completion
# times), scaled to the lab; 18 guests need a larger emulated machine. Long;
# not part of `make test`.
comma := ,
FATTREE_TDFS ?= 1,5,10,20
FATTREE_MEMORY ?= 6144
reproduce-fattree: deps
	$(SELENA) lab build
	$(SELENA) lab run --memory $(FATTREE_MEMORY) -- selena sweep scenarios/fat_tree_fct.py \
		--tdf $(FATTREE_TDFS) --baseline mininet --out build/results/fattree
	$(VENV)/bin/python -m selena.analysis.fct --out build/results/fattree \
		--title "Fat tree: flow completion times" \
		$(foreach t,$(subst $(comma), ,$(FATTREE_TDFS)),tdf$(t)=build/results/fattree/runs/tdf$(t)-r1) \
		mininet=build/results/fattree/runs/mininet-r1

# SELENA's Figure 11 (flow completion times through an OpenFlow switch
# with Open vSwitch's control plane and the Pica8 model) at the paper's
# load: 30 virtual seconds of 1 MB flows at 10 flows/s per profile, TDF 10
# (about 15 minutes in the lab); the CDF plotted on the host. Not part of
# `make test`, which runs a short, overloaded version of it.
reproduce-fct: deps
	$(SELENA) lab build
	$(SELENA) lab run -- sh -c 'rm -rf build/results/fct; \
		selena run scenarios/switch_model_fct.py --tdf 10 --out build/results/fct'
	$(VENV)/bin/python -m selena.analysis.fct --out build/results/fct \
		--title "Figure 11: flow completion times, 1 MB flows at 10 flows/s, TDF 10" \
		ideal=build/results/fct/fct-ideal.csv pica8-p3290=build/results/fct/fct-pica8-p3290.csv

# QJump in SELENA (seed 004), scaled to the lab: ping beside bulk traffic,
# with and without priority queueing, at TDF 20 (Figure 13); memcached's
# request latency idle and beside bulk traffic at TDF 10, as the paper ran
# it, with priority queueing, with CPU time scaling, and with 8 requests in
# flight rather than 128 (Table II, Figures 10-12 and 14); PTPd's largest
# clock offset idle and beside bulk traffic per TDF (Table I). Tables on
# stdout, plots in build/results/qjump.
# Long (about 95 minutes); not part of `make test`.
QJUMP_PTPD_TDFS ?= 1 10 20
reproduce-qjump: deps
	$(SELENA) lab build --with debian
	$(SELENA) lab run --with debian -- sh -c 'set -e; r=build/results/qjump; rm -rf $$r; \
		selena run scenarios/qjump_ping.py --out $$r/ping; \
		selena run scenarios/qjump_ping.py --param prio=1 --out $$r/ping-prio; \
		selena run scenarios/qjump_memcached.py --out $$r/memcached; \
		selena run scenarios/qjump_memcached.py --param prio=1 --out $$r/memcached-prio; \
		selena run scenarios/qjump_memcached.py --param cpu=real --out $$r/memcached-real; \
		selena run scenarios/qjump_memcached.py --param concurrency=8 --out $$r/memcached-c8; \
		selena run scenarios/qjump_memcached.py --param concurrency=8 --param prio=1 \
			--out $$r/memcached-c8-prio; \
		for t in $(QJUMP_PTPD_TDFS); do \
			selena run scenarios/qjump_ptpd.py --tdf $$t --out $$r/ptpd-tdf$$t; done'
	$(VENV)/bin/python -m selena.analysis.qjump build/results/qjump --plots build/results/qjump

clean:
	rm -rf $(VENV) xen-patches/build xen-patches/out guest-agent/build
