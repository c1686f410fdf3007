# vid2sid_ros: `make demo` runs the main job, `make test` runs the tests.
# Both first run `make setup`, which is idempotent and fast once done.

SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
# Keep DDS discovery on this machine, in a domain of its own (0-232).
ROS_ENV := ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID=$${ROS_DOMAIN_ID:-$$(( $$$$ % 200 + 20 ))}
# SKIP_SETUP=1 runs demo/test against an existing .venv without re-checking it.
SETUP_DEP := $(if $(SKIP_SETUP),check-venv,setup)

.PHONY: setup demo test readme-picture clean distclean check-venv

setup:
	@VID2SID_VENV="$(abspath $(VENV))" bash tools/setup_env.sh

check-venv:
	@if [ ! -x "$(PY)" ]; then echo "vid2sid: $(VENV) is missing: run \`make setup\` first" >&2; exit 2; fi

demo: $(SETUP_DEP)
	@$(ROS_ENV) $(VENV)/bin/vid2sid demo $(ARGS)

# Two worker processes (pytest-xdist), a test file per worker at a time so module fixtures are
# built once; each worker has a ROS domain of its own (test/conftest.py). TEST_JOBS=1: one process.
# A worker that dies is not replaced: the run ends red naming its test (pytest-xdist 3.8's file-wise
# scheduling stalls for good after replacing a dead worker).
TEST_JOBS ?= 2
test: $(SETUP_DEP)
	@$(ROS_ENV) $(PY) -m pytest -q $(if $(filter-out 1,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile --max-worker-restart=0) test $(PYTEST_ARGS)

# The README's picture: the browser test's screenshot of a calibration report (needs chromium).
readme-picture: $(SETUP_DEP)
	@command -v chromium >/dev/null || { echo "vid2sid: make readme-picture needs chromium (apt-get install -y chromium)" >&2; exit 2; }
	@$(ROS_ENV) VID2SID_README_PICTURE="$(abspath docs/images/report.png)" $(PY) -m pytest -q \
		test/test_report_browser.py -k readme_picture -p no:cacheprovider

clean:
	rm -rf build install log .pytest_cache
	find . -path ./$(VENV) -prune -o -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	@echo "kept $(VENV) (make distclean removes it too)"

distclean: clean
	rm -rf $(VENV)
