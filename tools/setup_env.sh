#!/usr/bin/env bash
# Set up vid2sid_ros on a machine WITHOUT a ROS 2 install (Python >= 3.11):
#   1. create (or reuse) the venv .venv
#   2. pip install the pinned requirements.txt (ROS 2 Kilted core from PyPI `ros-*` wheels) and
#      requirements-ray.txt (Ray, for `--executor ray` and its tests; VID2SID_NO_RAY=1 leaves it out)
#      -- skipped when those files are unchanged since the last install
#   3. rewrite the foreign /opt/python/... include paths the ros-* wheels carry in their
#      share/**/*.cmake files to this venv's Python and numpy include dirs
#   4. configure, build and install the package (rosidl interfaces + the Python modules
#      of vid2sid_ros/ + launch/config/resource + the `vid2sid` command) into the venv
#      prefix with CMake -- cmake's own up-to-date checks make a second run a no-op;
#      then the same for vendor/tf2_msgs (tf2_msgs/msg/TFMessage, for /tf_static), but only
#      when no tf2_msgs is importable (or the one there is this vendored build)
#   5. check that `from vid2sid_ros.msg import Trajectory` and `from tf2_msgs.msg import
#      TFMessage` work in the venv
#
# Environment: PYTHON (interpreter for the venv, default python3), VID2SID_VENV (default
# <repo>/.venv), VID2SID_BUILD_DIR (default <repo>/build/venv), VID2SID_JOBS (default nproc).
set -euo pipefail

T0=$(date +%s.%N)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VID2SID_VENV:-$ROOT/.venv}
BUILD=${VID2SID_BUILD_DIR:-$ROOT/build/venv}
TF2_BUILD=$BUILD-tf2_msgs
PY=${PYTHON:-python3}
JOBS=${VID2SID_JOBS:-$(nproc 2>/dev/null || echo 2)}
STAMP=$VENV/.vid2sid-requirements.stamp
LOG=$ROOT/build/setup.log

# Nothing here talks DDS, but keep any stray ROS traffic on this machine anyway.
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$(( $$ % 200 + 20 ))}

log() { echo "[setup $(elapsed)s] $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

apt_install() {  # apt_install PKG...: only as root on a Debian-like machine
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing with apt-get: $*"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    die "missing system packages: $* (install them, e.g. sudo apt-get install $*)"
  fi
}

mkdir -p "$ROOT/build"

# --- 0. system tools: cmake, a C/C++ compiler, make ---------------------------------
missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
if [ ${#missing[@]} -gt 0 ]; then apt_install "${missing[@]}"; fi
# headless Chromium opens the HTML reports in the tests (test/test_report_browser.py); optional:
# installed when root, otherwise those tests skip and say why
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -z "${VID2SID_NO_CHROMIUM:-}" ]; then
  apt_install chromium || log "chromium not installed (the report browser tests will skip)"
fi

# --- 1. the venv ---------------------------------------------------------------------
if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  command -v "$PY" >/dev/null 2>&1 || die "no '$PY' found: install Python >= 3.11 or set PYTHON=/path/to/python3.11"
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$PY is Python $("$PY" -c 'import platform; print(platform.python_version())'); vid2sid_ros needs Python >= 3.11 (set PYTHON=...)"
  if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then apt_install python3-venv; fi
  log "creating venv $VENV with $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
VPY=$VENV/bin/python
PYINC=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$PYINC/Python.h" ]; then
  apt_install python3-dev
  [ -f "$PYINC/Python.h" ] || die "Python.h not found in $PYINC: install the development headers of $("$VPY" -c 'import sys; print(sys._base_executable)')"
fi

# --- 2. pinned requirements ----------------------------------------------------------
# Ray (the optional `--executor ray`, docs/executor.md) is installed too so that its tests run; a Ray
# started by vid2sid binds 127.0.0.1 and sends no usage statistics.
REQS=(-r "$ROOT/requirements.txt")
[ -z "${VID2SID_NO_RAY:-}" ] && REQS+=(-r "$ROOT/requirements-ray.txt")
want=$( { cat "$ROOT/requirements.txt" "$ROOT/requirements-ros.txt"; [ -z "${VID2SID_NO_RAY:-}" ] && cat "$ROOT/requirements-ray.txt"
          "$VPY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)
have=$(cat "$STAMP" 2>/dev/null || true)
if [ "$want" != "$have" ]; then
  log "installing ${REQS[*]//$ROOT\//} into $VENV (pip; a few minutes on an empty cache)"
  # pip's warnings about absent local mirror folders are noise: filter them out.
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$VPY" -m pip install --no-input -q "${REQS[@]}" 2>&1 \
    | { grep -v -e 'is ignored: it is neither a file nor a directory' || true; }
  rm -rf "$BUILD" "$TF2_BUILD"  # configure afresh against the new packages
  log "pip install done"
  REINSTALLED=1
else
  log "requirements unchanged since last install: skipping pip"
  REINSTALLED=0
fi

# --- 3. foreign include paths in the ros-* wheels' CMake exports --------------------
NPINC=$("$VPY" -c 'import numpy; print(numpy.get_include())')
mapfile -d '' foreign < <(grep -rlZ --include='*.cmake' -e '/opt/python/' "$VENV/share" 2>/dev/null || true)
if [ ${#foreign[@]} -gt 0 ]; then
  log "rewriting foreign /opt/python include paths in ${#foreign[@]} cmake files -> $PYINC, $NPINC"
  sed -i -E \
    -e "s#/opt/python/[^;\"]*/site-packages/numpy/(_core/)?include#${NPINC}#g" \
    -e "s#/opt/python/[^/;\"]+/include/python3\.[0-9]+t?#${PYINC}#g" \
    "${foreign[@]}"
  if grep -rl --include='*.cmake' -e '/opt/python/' "$VENV/share" >/dev/null 2>&1; then
    echo "setup: warning: some /opt/python paths were not rewritten:" >&2
    grep -rn --include='*.cmake' -e '/opt/python/' "$VENV/share" | head -5 >&2
  fi
fi
[ "$REINSTALLED" = 1 ] && echo "$want" > "$STAMP"

# --- 4. build + install the package into the venv prefix ----------------------------
export AMENT_PREFIX_PATH=$VENV
export CMAKE_PREFIX_PATH=$VENV
export PATH=$VENV/bin:$PATH
run_logged() {  # run a command, its output to $LOG; show the tail on failure
  if ! "$@" >>"$LOG" 2>&1; then
    echo "setup: error: '$*' failed; last lines of $LOG:" >&2
    tail -40 "$LOG" >&2
    exit 1
  fi
}
: > "$LOG"
cmake_install() {  # cmake_install SRC BUILD_DIR WHAT: configure (once), build, install into the venv
  local src=$1 build=$2 what=$3
  if [ ! -f "$build/CMakeCache.txt" ] || ! grep -qx "CMAKE_INSTALL_PREFIX:PATH=$VENV" "$build/CMakeCache.txt"; then
    log "configuring $what with cmake (build dir $build)"
    rm -rf "$build"
    run_logged cmake -S "$src" -B "$build" \
      -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$VENV" \
      -DPython3_EXECUTABLE="$VPY" \
      -DBUILD_TESTING=OFF
  fi
  log "building $what (cmake --build, $JOBS jobs; up-to-date targets are skipped)"
  run_logged cmake --build "$build" -j "$JOBS"
  run_logged cmake --install "$build"
}
cmake_install "$ROOT" "$BUILD" "the package's interfaces"
# tf2_msgs: the PyPI ros-* wheels have none, so vendor/tf2_msgs (upstream's TFMessage, same
# type hash) is built -- never over a tf2_msgs of a ROS install, only where none imports or
# where the one installed is this vendored build (then the rebuild is a no-op)
if ! (cd / && "$VPY" -c 'import tf2_msgs.msg') >/dev/null 2>&1 \
    || grep -qs 'vendored by vid2sid_ros' "$VENV/share/tf2_msgs/package.xml"; then
  cmake_install "$ROOT/vendor/tf2_msgs" "$TF2_BUILD" "vendor/tf2_msgs (tf2_msgs/msg/TFMessage for /tf_static)"
else
  log "tf2_msgs is installed already: vendor/tf2_msgs not built"
fi
n_installed=$(grep -c '^-- Installing' "$LOG" || true)
log "installed into $VENV ($n_installed files changed; log: $LOG)"

# --- 5. smoke check, from outside the checkout ---------------------------------------
if ! (cd / && "$VPY" -c 'from vid2sid_ros.msg import Trajectory, ExcitationCommand, Keypoints, ParameterUpdate; from vid2sid_ros.srv import Propose, Rollout; from tf2_msgs.msg import TFMessage') 2>>"$LOG"; then
  tail -20 "$LOG" >&2
  die "the venv cannot import vid2sid_ros.msg after the build (see $LOG)"
fi

log "ok: $VENV is ready (vid2sid_ros interfaces importable, \`$VENV/bin/vid2sid\` installed)"
echo "setup: done in $(elapsed) s"
