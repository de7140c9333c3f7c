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
	reproduce-fct reproduce-qjump reproduce-adaptive reproduce-starscale reproduce-deploy \
	reproduce-mflops reproduce-bandwidth reproduce-spacing reproduce-all figures clean

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

# No C build, no fuzzers, no Open vSwitch, no lab. One test process per CPU
# (pytest-xdist): the tier's budget is a minute, and one process took 65 s.
check: lint
	$(VENV)/bin/pytest -q -n auto -m 'not lab and not toolchain'

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

# What is too long for make test's 60-minute budget: the sweeps and
# reproductions' pieces in the lab, and the build of every patch of the
# hypervisor series on its own (13 minutes when the series changed).
.PHONY: test-long
test-long: deps
	$(SELENA) lab build --with debian
	$(VENV)/bin/pytest -v --durations=30 -m 'long or scale'

demo: deps
	$(SELENA) lab build
	$(SELENA) lab demo --tdf $(TDF)

bench: deps
	$(VENV)/bin/python scenarios/bench_plan.py
	$(SELENA) lab build
	$(SELENA) lab bench
	$(SELENA) lab bench-deploy
	$(SELENA) lab bench-guests
	$(SELENA) lab bench-control

# Issue 13 item 7: the highest faithful link rate, Mininet vs selena per TDF.
# Long (about half an hour in the lab); not part of `make test`.
bench-bandwidth: deps
	$(SELENA) lab build
	$(strip $(SELENA) lab bench-bandwidth $(call opt,BANDWIDTH_TDFS,--tdfs) \
		$(call opt,BANDWIDTH_REFINE,--refine))

# The paper reproductions (docs/reproductions.md), each one `selena
# reproduce NAME`: run in the lab into a fresh build/results/<name>/<date>/
# (never over older results), then docs/results/<name>/ refreshed from it,
# a progress line per run and the total time printed. Long (minutes to two
# hours each); not part of `make test`. `make -n reproduce-all` lists them;
# `selena reproduce --list NAME` prints a reproduction's lab commands.
# `make figures` then draws docs/figures and the docs' tables from docs/results.
# Their scale: each variable below, when set (`make reproduce-star
# STAR_TDFS=1,10`), passes its option; unset, the reproduction's own default
# holds (selena/reproduce.py's Params, listed in docs/reproductions.md), so
# the defaults live in one place.
opt = $(if $($(1)),$(2) $(if $(3),"$($(1))",$($(1))))
REPRODUCE = $(strip $(SELENA) reproduce $(call opt,STAR_TDFS,--star-tdfs) \
	$(call opt,FATTREE_TDFS,--fattree-tdfs) $(call opt,FATTREE_MEMORY,--fattree-memory) \
	$(call opt,QJUMP_PTPD_TDFS,--qjump-ptpd-tdfs,quoted) $(call opt,FCT_RATE,--fct-rate) \
	$(call opt,ADAPTIVE_TDFS,--adaptive-tdfs) $(call opt,STARSCALE_RATES,--starscale-rates) \
	$(call opt,STARSCALE_CLIENTS,--starscale-clients) \
	$(call opt,STARSCALE_TDFS,--starscale-tdfs) $(call opt,DEPLOY_HOSTS,--deploy-hosts) \
	$(call opt,DEPLOY_MEMORY,--deploy-memory) $(call opt,MFLOPS_VMS,--mflops-vms) \
	$(call opt,BANDWIDTH_TDFS,--bandwidth-tdfs) \
	$(call opt,BANDWIDTH_REFINE,--bandwidth-refine) \
	$(call opt,SPACING_RATES,--spacing-rates) $(call opt,SPACING_TDFS,--spacing-tdfs))

# Each target first checks its scale (`--list` runs nothing), so a bad value
# is one line before the lab builds.
# Every reproduction, one after the other (each in a lab boot of its own), in
# one `selena reproduce`, which prints the total and, when all have run,
# writes docs/results/reproduce-all.json (the docs' index says so).
REPRODUCTIONS = star fct qjump fattree adaptive starscale deploy mflops bandwidth spacing
reproduce-all: deps
	$(REPRODUCE) --list $(REPRODUCTIONS) >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) $(REPRODUCTIONS)

# SELENA's Figures 4 and 5 (star topology), scaled to the lab: a TDF sweep
# beside Mininet on the same Dom0 (about 10 minutes).
reproduce-star: deps
	$(REPRODUCE) --list star >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) star

# SELENA's Figure 11 (flow completion times through an OpenFlow switch with
# Open vSwitch's control plane and the Pica8 model) at the paper's load,
# FCT_RATE flows/s of 1 MB per profile, TDF 10. `make test` runs a short,
# overloaded version of it.
reproduce-fct: deps
	$(REPRODUCE) --list fct >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) fct

# QJump in SELENA (seed 004), scaled to the lab: ping beside bulk traffic,
# with and without priority queueing, at TDF 20 (Figure 13); memcached's
# request latency idle and beside bulk traffic at TDF 10, as the paper ran
# it, with priority queueing, with CPU time scaling, and with 8 requests in
# flight rather than 128 (Table II, Figures 10-12 and 14); PTPd's largest
# clock offset idle and beside bulk traffic per TDF of QJUMP_PTPD_TDFS
# (Table I; above TDF 20 with 10 s windows). About two hours.
reproduce-qjump: deps
	$(REPRODUCE) --list qjump >/dev/null
	$(SELENA) lab build --with debian
	$(REPRODUCE) qjump

# SELENA's Figure 6 and Tables 2-3 (half a k=4 fat tree, flow completion
# times), scaled to the lab; 18 guests need a larger emulated machine
# (FATTREE_MEMORY). About 35 minutes.
reproduce-fattree: deps
	$(REPRODUCE) --list fattree >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) fattree

# VT-Mininet's adaptive-TDF experiment (seed 002) on the star: one flow, then
# four, then one; a sweep over ADAPTIVE_TDFS (its TDF 1 run and the run at
# the TDF it recommends are the fixed runs), then `--tdf auto:1-<last>`;
# per-phase error, verdict and real time of the three (about 90 minutes).
reproduce-adaptive: deps
	$(REPRODUCE) --list adaptive >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) adaptive

# SELENA's Figures 7, 8 and 10 (scalability of the star): 4 clients at each
# client link rate of STARSCALE_RATES (Mbit/s; x100 the paper's) at TDF 20,
# and each client count of STARSCALE_CLIENTS swept over STARSCALE_TDFS, every
# flow at once for 5 virtual seconds; Dom0 and guest CPU from the fidelity
# monitor. About 50 minutes; the paper's scale (up to 60 clients) needs a
# larger machine.
reproduce-starscale: deps
	$(REPRODUCE) --list starscale >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) starscale

# SELENA's cold boot of 52 nodes (about 130 s in the paper): DEPLOY_HOSTS
# tiny guests per run, deploy and boot time and Dom0 memory. About 15 min.
reproduce-deploy: deps
	$(REPRODUCE) --list deploy >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) deploy

# QJump in SELENA, Figures 2 and 3: the summed work of MFLOPS_VMS VMs running
# a CPU loop at once at TDF 1, 10 and 20, uncapped and capped to 100/TDF %.
# About 25 minutes.
reproduce-mflops: deps
	$(REPRODUCE) --list mflops >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) mflops

# SELENA's Figure 9: bench-bandwidth's faithful rate per TDF of
# BANDWIDTH_TDFS, each doubling bisected BANDWIDTH_REFINE times, as a
# results bundle in docs/results/bandwidth. About 35 minutes.
reproduce-bandwidth: deps
	$(REPRODUCE) --list bandwidth >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) bandwidth

# Mininet-HiFi's packet-spacing CCDF (dissertation Figure 2.7) per link rate
# of SPACING_RATES (Mbit/s, the paper's own) at each TDF of SPACING_TDFS,
# from the fidelity monitor's histogram of spacing errors. About 15 minutes.
reproduce-spacing: deps
	$(REPRODUCE) --list spacing >/dev/null
	$(SELENA) lab build
	$(REPRODUCE) spacing

# Every PNG in docs/figures and every generated docs table (between
# `<!-- figures:NAME -->` marks) from docs/results, on the host, no lab:
# pinned plotting dependencies (the `figures` extra), drawn into an empty
# directory first, then copied in place. Deterministic: a re-run changes no
# byte (tests/test_figures.py checks the committed ones).
figures: $(VENV)/.figures
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(VENV)/bin/python -m selena.analysis.figures --results docs/results --docs docs \
		--out "$$tmp" --install

$(VENV)/.figures: pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[figures]'
	touch $@

clean:
	rm -rf $(VENV) xen-patches/build xen-patches/out guest-agent/build
