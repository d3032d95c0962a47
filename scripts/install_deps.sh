#!/usr/bin/env bash
# Installs Cortado's build and run dependencies from Debian 12's archive.
# Quick and quiet when everything is already installed.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config ccache
  protobuf-compiler libprotobuf-dev
  libgoogle-glog-dev libgflags-dev
  liblmdb-dev libopenblas-openmp-dev libopencv-dev zlib1g-dev libhdf5-dev
  libjpeg62-turbo-dev python3-pil
  libgtest-dev
  libopenmpi-dev openmpi-bin
  python3-matplotlib python3-numpy
  python3-venv python3-setuptools python3-wheel python3-pydot graphviz  # pip install ./python and its test; draw_net
  python3-onnx python3-protobuf  # scripts/export_onnx.py (its test adds ONNX Runtime: install_python_deps.sh)
  python3-torch python3-torchvision  # scripts/convert_torchvision.py and its test (CPU builds)
  dpkg-dev file  # cpack -G DEB: dpkg-shlibdeps computes the package's Depends
  dataset-fashion-mnist
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
