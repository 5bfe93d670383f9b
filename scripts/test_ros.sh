#!/usr/bin/env bash
# The ROS stage (`make test-ros`; `make test` runs it where ROS 2 is sourced): the package built by colcon on the
# sourced ROS 2 and tested with the distribution's Python stack.
#
#   source /opt/ros/jazzy/setup.bash && make test-ros
#   scripts/test_ros.sh --install-deps      # as root: apt-get the distribution's python3-* packages it tests on
#
# 1. A venv on the system Python made with --system-site-packages (PEP 668 safe), holding only what the
#    distribution lacks (requirements-ros.txt); a constraints file keeps the distribution's numpy, scipy,
#    matplotlib, ... so those are what is tested (Debian 12: numpy 1.24, scipy 1.10, matplotlib 3.6).
# 2. `colcon build` plain and `--symlink-install`, each into its own build/install under $ROS_WS (default .ros-ws).
# 3. On each sourced install, with the venv's interpreter and the installed package (not the source tree):
#    the plain build runs the WHOLE suite with pytest (ROS-free tests on the distribution's stack under ROS's pytest
#    plugins, on every core, then the rclpy node tests, launch tests, rclpy-vs-rosbags serialisation one at a time);
#    the symlink build runs the test files that need ROS 2 again through `colcon test` (CMakeLists.txt registers the
#    suite; SHAPE_SENSING_TEST_FILES selects) and `colcon test-result`, and checks that every one of them reported. A run that collects nothing, fails a test or skips one for want of rclpy fails.
# 4. The RViz launch tests (test/test_rviz.py: each launch file with rviz:=true under Xvfb, RViz's log and a
#    screenshot judged) run once, on the plain build, timed on their own; their screenshots and logs go to out/rviz/.
#    Where RViz or Xvfb is absent they skip, unless SHAPE_SENSING_REQUIRE_RVIZ=1 (CI), where that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SYS_PY=${ROS_PYTHON:-/usr/bin/python3}
VENV=${ROS_VENV:-$ROOT/.venv-ros}
WS=${ROS_WS:-$ROOT/.ros-ws}

# module -> Debian/Ubuntu package (also the rosdep keys of package.xml)
DISTRO_MODULES="numpy:python3-numpy scipy:python3-scipy matplotlib:python3-matplotlib yaml:python3-yaml
threadpoolctl:python3-threadpoolctl can:python3-can serial:python3-serial smbus2:python3-smbus2
tqdm:python3-tqdm hypothesis:python3-hypothesis pytest:python3-pytest ensurepip:python3-venv"

missing_distro_packages() {
  local missing="" pair
  for pair in $DISTRO_MODULES; do
    "$SYS_PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('${pair%%:*}') is None)" 2>/dev/null \
      || missing="$missing ${pair##*:}"
  done
  echo "$missing"
}

if [ "${1:-}" = "--install-deps" ]; then
  missing="$(missing_distro_packages)"
  if [ -n "$missing" ]; then
    echo "installing the distribution's Python packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends $missing >/dev/null
  fi
  exit 0
fi

: "${ROS_DISTRO:?ROS 2 is not sourced: source /opt/ros/<distro>/setup.bash first}"
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$(( RANDOM % 90 + 10 ))}
missing="$(missing_distro_packages)"
if [ -n "$missing" ]; then
  echo "the ROS stage tests on the distribution's Python packages; install them first:" >&2
  echo "  sudo apt-get install$missing    (or: sudo scripts/test_ros.sh --install-deps)" >&2
  exit 1
fi

clock() { date +%s; }
t_start=$(clock)
mkdir -p "$WS"
touch "$WS/COLCON_IGNORE"
SUMMARY="$WS/summary.txt"
: > "$SUMMARY"
note() { echo "$1" >> "$SUMMARY"; echo "== $1"; }

# -- 1. the venv ----------------------------------------------------------------------------------------------------
t0=$(clock)
stamp="$VENV/.installed-$(cat requirements-ros.txt | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  rm -rf "$VENV"
  "$SYS_PY" -m venv --system-site-packages "$VENV"
  "$SYS_PY" - > "$VENV/constraints.txt" <<'PY'
import importlib.metadata as md
for dist in ["numpy", "scipy", "matplotlib", "PyYAML", "threadpoolctl", "python-can", "pyserial", "smbus2", "tqdm",
             "hypothesis", "pytest"]:
    print(f"{dist}=={md.version(dist)}")
PY
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c "$VENV/constraints.txt" \
    -r requirements-ros.txt 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }
  touch "$stamp"
fi
PY="$VENV/bin/python"
stack="$("$PY" -c 'import sys, numpy, scipy, matplotlib, rosbags, pytest
from importlib.metadata import version
rb = version("rosbags")
print(f"Python {sys.version.split()[0]} ({sys.base_prefix}), numpy {numpy.__version__}, scipy {scipy.__version__}, "
      f"matplotlib {matplotlib.__version__}, rosbags {rb}, pytest {pytest.__version__}")')"
note "venv $VENV: $stack [$(( $(clock) - t0 )) s]"

# -- 2./3. build and test each install mode ---------------------------------------------------------------------------
ros_test_files() {  # test files that need ROS 2 (rclpy, launch, launch_testing, launch_pytest, rosidl, ros2 CLI)
  grep -lE '^\s*(import|from) (rclpy|launch|launch_ros|launch_testing|launch_testing_ros|launch_pytest|rosidl_runtime_py|rosbag2_py)\b|ros2 (launch|bag|run)|SHAPE_SENSING_ROS_TEST' test/test_*.py \
    | grep -v 'test_launch_static.py' | sort
}

run_pytest() {  # label, args...: pytest with the venv's Python; exit 5 (nothing collected) and rclpy skips fail
  local label=$1; shift
  local log="$WS/pytest-$label.log" rc t0
  t0=$(clock)
  set +e
  SHAPE_SENSING_TEST_INSTALLED=1 "$PY" -P -m pytest -q -p no:cacheprovider -rs "$@" > "$log" 2>&1
  rc=$?
  set -e
  tail -n 25 "$log"
  local last
  last="$(grep -E '[0-9]+ (passed|failed|error|skipped)' "$log" | tail -n 1 || true)"
  if [ "$rc" -eq 5 ]; then echo "pytest ($label) collected no test: failure" >&2; return 1; fi
  if [ "$rc" -ne 0 ]; then echo "pytest ($label) failed (exit $rc)" >&2; return "$rc"; fi
  if grep -q "needs rclpy" "$log"; then echo "pytest ($label): tests skipped for want of rclpy with ROS 2 sourced" >&2; return 1; fi
  note "pytest $label: $last [$(( $(clock) - t0 )) s]"
}

for mode in plain symlink; do
  base="$WS/$mode"
  rm -rf "$base"
  mkdir -p "$base"
  extra=()
  [ "$mode" = symlink ] && extra=(--symlink-install)
  t0=$(clock)
  # the venv's interpreter builds, so the console scripts run on it (distribution stack + requirements-ros.txt)
  VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" colcon --log-base "$base/log" build --paths "$ROOT" \
    --build-base "$base/build" --install-base "$base/install" "${extra[@]}" \
    --event-handlers console_cohesion- summary+ \
    --cmake-args -DPython3_EXECUTABLE="$VENV/bin/python3" -DBUILD_TESTING="$([ "$mode" = symlink ] && echo ON || echo OFF)"
  note "colcon build ($mode): [$(( $(clock) - t0 )) s]"
  (
    set +u
    # shellcheck disable=SC1091
    source "$base/install/setup.bash"
    set -u
    # both halves of the package import from the install: generated messages and hand-written code
    "$PY" -P -c 'import shape_sensing.pipelines, shape_sensing.messages
from shape_sensing.msg import TofFrame, PivotEstimate
import shape_sensing, pathlib, sys
where = pathlib.Path(shape_sensing.__file__).absolute().parent
assert "'"$base"'/install" in str(where), where
print("shape_sensing and shape_sensing.msg from", where)'
    exes="$(ros2 pkg executables shape_sensing | wc -l)"
    expected="$(grep -cE '^\s+[A-Za-z0-9_-]+ = shape_sensing\.' setup.cfg)"
    [ "$exes" -eq "$expected" ] || { echo "ros2 pkg executables: $exes executables, setup.cfg declares $expected" >&2; exit 1; }
    command -v shape-sensing >/dev/null || { echo "shape-sensing is not on PATH in the sourced workspace" >&2; exit 1; }
    # every node starts on the distribution's packages alone: the system Python (no venv, so no rosbags, mcap,
    # trimesh, ...) imports each installed node executable (-h exits after the imports, before rclpy.init)
    for exe in $(grep -E '^\s+[a-z0-9_]+ = shape_sensing\.nodes\.' setup.cfg | awk '{print $1}'); do
      "$SYS_PY" -P "$base/install/shape_sensing/lib/shape_sensing/$exe" -h > /dev/null \
        || { echo "$exe does not start on $SYS_PY with the distribution's packages alone" >&2; exit 1; }
    done
    note "every node imports on $SYS_PY alone ($mode)"
    if [ "$mode" = plain ]; then
      # the whole suite: the test files that need no ROS 2 on every core (pytest-xdist), those that do one at a
      # time (launch tests start processes and take the DDS domain); the RViz tests after, on their own
      ros_files=()
      mapfile -t ros_files < <(ros_test_files | grep -v 'test/test_rviz.py')
      ignores=()
      for f in "${ros_files[@]}" test/test_rviz.py; do ignores+=("--ignore=$f"); done
      run_pytest "$mode-ros-free" -n auto test/ "${ignores[@]}"
      run_pytest "$mode-ros" "${ros_files[@]}"
      rm -rf out/rviz
      run_pytest "$mode-rviz" test/test_rviz.py
      note "RViz screenshots and logs: $ROOT/out/rviz/"
    else
      # the RViz tests ran on the plain build (they take minutes); here they report as skipped
      export SHAPE_SENSING_SKIP_RVIZ="ran on the plain build (scripts/test_ros.sh)"
      # the way a ROS user runs the tests: colcon test (CMakeLists.txt registers the suite), colcon test-result;
      # the plain build ran the whole suite, so here only the test files that need ROS 2 (SHAPE_SENSING_TEST_FILES)
      ros_test_files > "$WS/ros-test-files.txt"
      export SHAPE_SENSING_TEST_FILES="$WS/ros-test-files.txt"
      t0=$(clock)
      VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" colcon --log-base "$base/log" test --paths "$ROOT" \
        --build-base "$base/build" --install-base "$base/install" --event-handlers console_cohesion- summary+
      set +e
      colcon test-result --test-result-base "$base/build" --all > "$WS/colcon-test-result.txt" 2>&1
      set -e
      tail -n 3 "$WS/colcon-test-result.txt"
      result="$(grep -E '^Summary: [0-9]+ tests' "$WS/colcon-test-result.txt" || true)"
      read -r n_tests n_errors n_failures < <(echo "$result" | sed -E 's/^Summary: ([0-9]+) tests?, ([0-9]+) errors?, ([0-9]+) failures?.*/\1 \2 \3/')
      xml="$base/build/shape_sensing/test_results/shape_sensing/shape_sensing_pytest.xunit.xml"
      if [ -z "$result" ] || [ "${n_tests:-0}" -eq 0 ]; then echo "colcon test ran no test" >&2; exit 1; fi
      if [ "$n_errors" -ne 0 ] || [ "$n_failures" -ne 0 ]; then
        colcon test-result --test-result-base "$base/build" --verbose >&2 || true
        exit 1
      fi
      if grep -q "needs rclpy" "$xml"; then echo "colcon test: tests skipped for want of rclpy" >&2; exit 1; fi
      for f in $(ros_test_files); do  # every test file that needs ROS 2 ran in it
        grep -q "$(basename "$f" .py)" "$xml" \
          || { echo "colcon test: no result from $f" >&2; exit 1; }
      done
      note "colcon test ($mode, the test files that need ROS 2): $result [$(( $(clock) - t0 )) s]"
    fi
  )
done

echo
echo "ROS stage summary (ROS 2 $ROS_DISTRO, ROS_DOMAIN_ID=$ROS_DOMAIN_ID):"
cat "$SUMMARY"
echo "ROS stage wall time: $(( $(clock) - t_start )) s"
