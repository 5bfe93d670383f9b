# The README's two commands are `make demo` and `make test`; each sets itself up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-slow lint typecheck pytest bench clean test-ros test-jazzy-stack docs screenshots

$(STAMP): requirements.txt requirements-dev.txt setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

## Full demo on simulated sensors: writes out/vine-imu/vine-imu.mcap and .png, prints accuracy.
demo: $(STAMP)
	$(VENV)/bin/shape-sensing demo vine-imu --out out/vine-imu

lint: $(STAMP)
	$(VENV)/bin/ruff check shape_sensing test benchmarks setup.py

typecheck: $(STAMP)
	$(VENV)/bin/mypy shape_sensing

# on every core (pytest-xdist); the long end-to-end runs marked `slow` are left to `make test-slow`
pytest: $(STAMP)
	$(PY) -m pytest -q -n auto -m "not slow"

## The long end-to-end runs (demos at full length, MuJoCo scenes, recorded-dataset evaluations): CI's own stage.
test-slow: $(STAMP)
	$(PY) -m pytest -q -n auto -m slow

## The manual: Sphinx (as rosdoc2 builds ROS 2 packages' docs), warnings are errors; opens at docs/_build/html.
docs: $(STAMP)
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	@echo "docs/_build/html/index.html"

## Lint, type check and the test suite; where ROS 2 is sourced (ROS_DISTRO set) also the ROS stage.
test: lint typecheck pytest
ifneq ($(ROS_DISTRO),)
	$(MAKE) test-ros
endif

## ROS stage (needs ROS 2 sourced): colcon build plain and --symlink-install, the suite on the installed package
## with the distribution's Python stack (venv .venv-ros on /usr/bin/python3 --system-site-packages), rclpy and
## launch tests. See scripts/test_ros.sh.
test-ros:
	bash scripts/test_ros.sh

## RViz screenshots of docs/guides/rviz.md (docs/images/rviz_<robot kind>.png) from the RViz launch tests
## (test/test_rviz.py: each launch file with rviz:=true under Xvfb). Needs ROS 2 and RViz 2 sourced and the package
## built (make test-ros builds .ros-ws/plain); only a scene that passes its checks replaces its picture.
screenshots:
	bash scripts/rviz_screenshots.sh

## The ROS-free suite on ROS 2 Jazzy's numeric stack (Ubuntu 24.04: Python 3.12, numpy 1.26, scipy 1.11).
test-jazzy-stack:
	bash scripts/test_jazzy_stack.sh

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) -u $$b || exit 1; done

clean:
	rm -rf $(VENV) docs/_build docs/reference/cli.md build *.egg-info .mypy_cache .ruff_cache .pytest_cache out .venv-ros .ros-ws .venv-jazzy
