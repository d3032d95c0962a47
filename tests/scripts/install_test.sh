#!/usr/bin/env bash
# Installs Cortado from a build tree into a temporary prefix, checks what is
# there, and builds and runs tests/install (a program outside the tree that
# uses find_package(Cortado) and runs a forward pass). Everything goes in a
# fresh temporary folder, so the test may run beside the others.
# Usage: install_test.sh BUILD_DIR [CXX_COMPILER]; CMAKE names the cmake to
# use (default: the one on PATH).
set -euo pipefail
cmake=${CMAKE:-cmake}
build=$(cd "$1" && pwd)
cxx=${2:-}
here=$(cd "$(dirname "$0")/../install" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cortado-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in bin/trainer bin/convert_mnist bin/check_prototxt lib/libcortado.a lib/libcortado_proto.a \
         lib/libcortado_c.so include/cortado/net/net.hpp include/cortado/config.hpp include/cortado.pb.h \
         lib/cmake/Cortado/CortadoConfig.cmake lib/cmake/Cortado/CortadoConfigVersion.cmake \
         lib/cmake/Cortado/CortadoTargets.cmake share/cortado/cortado.proto share/cortado/plot_grad_stats.py \
         share/doc/cortado/LICENSE; do
  [ -e "$prefix/$f" ] || { echo "install_test: $f was not installed"; exit 1; }
done
# The CMake package names the prefix it sits in, never the build tree, and
# no installed header names the source tree.
if grep -rl "$build" "$prefix/lib/cmake"; then
  echo "install_test: the CMake package above names the build tree"; exit 1
fi
source_dir=$(cd "$here/../.." && pwd)
if grep -rlF "$source_dir" "$prefix/include"; then
  echo "install_test: the installed headers above name the source tree"; exit 1
fi
"$prefix/bin/trainer" --version
# The installed trainer plots grad_stats with the installed script.
cat >"$tmp/net.prototxt" <<'NET'
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 4 dim: 6 } shape { dim: 4 }
    data_filler { type: "gaussian" } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
NET
GLOG_logtostderr=1 "$prefix/bin/trainer" grad_stats --model="$tmp/net.prototxt" --iterations=1 --plot="$tmp/g.png" \
  >"$tmp/plot.log" 2>&1 || { cat "$tmp/plot.log"; exit 1; }
grep -qF "($prefix/share/cortado/plot_grad_stats.py)" "$tmp/plot.log" && [ -s "$tmp/g.png" ] ||
  { cat "$tmp/plot.log"; echo "install_test: the installed trainer did not plot with the installed script"; exit 1; }

args=(-S "$here" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release)
if [ -n "$cxx" ]; then args+=(-DCMAKE_CXX_COMPILER="$cxx"); fi
if command -v ninja >/dev/null; then args+=(-G Ninja); fi
"$cmake" "${args[@]}" >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
"$cmake" --build "$tmp/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
"$tmp/build/tiny_forward"
