#!/usr/bin/env bash
# `make screenshots`: the RViz launch tests (test/test_rviz.py) on the package built by `make test-ros`
# (.ros-ws/plain, or the workspace already sourced), each passing scene's screenshot, cropped to RViz's window,
# written to docs/images/rviz_<robot kind>.png. Needs ROS 2 with RViz 2 (../shared/ros2/install-rviz.sh), Xvfb and
# ImageMagick. Screenshots and RViz logs of every scene: out/rviz/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
: "${ROS_DISTRO:?ROS 2 is not sourced: source /opt/ros/<distro>/setup.bash first}"
PY=${ROS_VENV:-$ROOT/.venv-ros}/bin/python
WS=${ROS_WS:-$ROOT/.ros-ws}
if ! "$PY" -c 'import ament_index_python.packages as a; a.get_package_share_directory("shape_sensing")' 2>/dev/null; then
  [ -f "$WS/plain/install/setup.bash" ] || { echo "no build of the package: run make test-ros first" >&2; exit 1; }
  set +u
  # shellcheck disable=SC1091
  source "$WS/plain/install/setup.bash"
  set -u
fi
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$(( RANDOM % 90 + 10 ))}
export SHAPE_SENSING_REQUIRE_RVIZ=1 SHAPE_SENSING_RVIZ_DOCS="$ROOT/docs/images"
"$PY" -P -m pytest -q -p no:cacheprovider -rs test/test_rviz.py "$@"
ls -l docs/images/rviz_*.png
