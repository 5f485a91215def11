# Attention Lens. The two commands a fresh machine needs:
#   make run    set up .venv and start the app on the bundled default model (http://localhost:8501)
#   make test   set up .venv (+ Debian chromium) and run ruff and the whole test suite
PORT ?= 8501
PYTEST_ARGS ?=
# two pytest-xdist workers; tests/conftest.py says how the tests are shared out. PYTEST_WORKERS= runs in one process.
PYTEST_WORKERS ?= -n 2 --dist loadfile --no-loadscope-reorder

.PHONY: setup setup-browser run test lint bench verify export clean

setup:
	./scripts/setup.sh

setup-browser:
	./scripts/setup.sh --browser

run: setup
	.venv/bin/python -m streamlit run app.py --server.port=$(PORT)

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .


# Two runs: the suite on two workers, then the tests marked `alone` (ten browser sessions for a minute), which
# measure the machine and so run with nothing beside them (exit 5: the selection held none of them).
test: setup-browser lint
	.venv/bin/python -m pytest $(PYTEST_WORKERS) -m "not alone" $(PYTEST_ARGS)
	.venv/bin/python -m pytest -m alone $(PYTEST_ARGS) || test $$? -eq 5

bench: setup-browser
	.venv/bin/python -m benchmarks $(BENCH_ARGS)

verify: setup
	.venv/bin/python -m attention_core verify --text "The cat sat on the mat because it was tired."

clean:
	rm -rf .venv .pytest_cache .ruff_cache
