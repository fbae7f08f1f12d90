# Two entry points on a fresh machine:  `make demo`  and  `make test`.
# Both create .venv/ at the repository root and install what they need into it.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Pins for our own venv only (the CPU torch wheel on this machine's disk); setup.cfg keeps floors.
PIP    := $(PY) -m pip install --quiet -c constraints.txt
# Real dataset files for the tests, when the shared folder is present.
SGL_TEST_DATA ?= $(abspath $(wildcard ../shared/datasets))
export SGL_TEST_DATA

.PHONY: demo test test-postgres install install-test bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(VENV)/bin/python setup.cfg pyproject.toml constraints.txt
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/bin/python setup.cfg pyproject.toml constraints.txt
	$(PIP) -e '.[test]'
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: install
	$(VENV)/bin/sgl train --model sgc --dataset karate --seeds 5

test: install-test
	$(PY) -m pytest -q

# The multi-worker PostgreSQL search test on a throw-away server: Debian's `postgresql` package
# (apt-get install postgresql) provides initdb/pg_ctl/createdb; the server lives in a temporary
# folder, listens only on a Unix socket there, and is stopped and deleted afterwards.
PG_BIN ?= $(shell dirname "$$(readlink -f "$$(command -v initdb || ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")" 2>/dev/null)

test-postgres: install-test
	@test -x "$(PG_BIN)/initdb" -a -x "$(PG_BIN)/pg_ctl" -a -x "$(PG_BIN)/createdb" || \
		{ echo "test-postgres needs PostgreSQL's initdb, pg_ctl and createdb (apt-get install postgresql) or PG_BIN=DIR"; exit 2; }
	@set -e; dir=$$(mktemp -d /tmp/sglpg.XXXXXX); run=""; \
	if [ "$$(id -u)" = 0 ]; then run="runuser -u postgres --"; chown postgres "$$dir"; fi; \
	trap "$$run '$(PG_BIN)/pg_ctl' -D '$$dir/data' -m fast -w stop >/dev/null 2>&1; rm -rf '$$dir'" EXIT; \
	$$run "$(PG_BIN)/initdb" -D "$$dir/data" -A trust -U sgl --no-sync -E UTF8 >/dev/null; \
	$$run mkdir "$$dir/socket"; \
	$$run "$(PG_BIN)/pg_ctl" -D "$$dir/data" -l "$$dir/server.log" -w \
		-o "-k $$dir/socket -c listen_addresses='' -c fsync=off" start >/dev/null; \
	$$run "$(PG_BIN)/createdb" -h "$$dir/socket" -U sgl sgl_search; \
	echo "throw-away PostgreSQL server on $$dir/socket"; \
	SGL_TEST_POSTGRES_URL="postgresql+psycopg2://sgl@/sgl_search?host=$$dir/socket" \
		$(PY) -m pytest -q -rs tests/search/test_postgres.py

bench: install-test
	$(PY) benchmarks/bench_propagate.py

clean:
	rm -rf $(VENV) build *.egg-info
