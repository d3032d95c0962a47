#!/usr/bin/env bash
# Makes the Debian package of a build tree ("${CPACK:-cpack}" -G DEB), checks its control
# fields, unpacks it into a temporary root with dpkg -x (no installation, no
# root needed) and runs the packaged tools there. Everything goes in a fresh
# temporary folder, so the test may run beside the others.
# Usage: deb_package_test.sh BUILD_DIR; CPACK names the cpack to use (default:
# the one on PATH). Exit 77 (skipped) where dpkg is absent (not Debian).
set -euo pipefail
command -v dpkg-deb >/dev/null || { echo "deb_package_test: no dpkg-deb here"; exit 77; }
build=$(cd "$1" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cortado-deb-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"${CPACK:-cpack}" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; exit 1; }
deb=$(ls "$tmp"/pkg/cortado_*.deb)
echo "$(basename "$deb"), $(du -h "$deb" | cut -f1):"
dpkg-deb --field "$deb"

field() { dpkg-deb --field "$deb" "$1"; }
[ "$(field Package)" = cortado ] || { echo "deb_package_test: Package is not cortado"; exit 1; }
[ -n "$(field Version)" ] && [ -n "$(field Maintainer)" ] || { echo "deb_package_test: no Version or Maintainer"; exit 1; }
depends=$(field Depends)
# Computed by dpkg-shlibdeps: without it (Debian: dpkg-dev) CPack leaves Depends empty.
for p in libc6 libstdc++6 libprotobuf libgoogle-glog liblmdb; do
  case "$depends" in *"$p"*) ;; *) echo "deb_package_test: Depends lacks $p (is dpkg-dev installed?)"; exit 1 ;; esac
done
# The CUDA libraries are NVIDIA's, not Debian's: never in Depends.
case "$depends" in *cuda*|*cudnn*|*cublas*|*nccl*)
  echo "deb_package_test: Depends names a CUDA library"; exit 1 ;; esac

root=$tmp/root
dpkg -x "$deb" "$root"
for f in usr/bin/trainer usr/lib/libcortado.a usr/lib/libcortado_c.so usr/include/cortado/net/net.hpp \
         usr/lib/cmake/Cortado/CortadoConfig.cmake; do
  [ -e "$root/$f" ] || { echo "deb_package_test: the package lacks /$f"; exit 1; }
done

# The packaged programs link libcortado statically; libcortado_c.so is found
# in the unpacked lib folder, as it would be in /usr/lib.
export LD_LIBRARY_PATH=$root/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ldd "$root/usr/bin/trainer" "$root/usr/lib/libcortado_c.so" | grep 'not found'; then
  echo "deb_package_test: libraries above are missing"; exit 1
fi
"$root/usr/bin/trainer" --version
cat >"$tmp/tiny.prototxt" <<'NET'
name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
NET
"$root/usr/bin/check_prototxt" "$tmp/tiny.prototxt"
"$root/usr/bin/trainer" time --model="$tmp/tiny.prototxt" --iterations=2 --warmup=1 --gpu=cpu >"$tmp/time.log" 2>&1 ||
  { cat "$tmp/time.log"; exit 1; }
grep -i 'forward-backward\|Average' "$tmp/time.log" | head -3
echo "deb_package_test: ok"
