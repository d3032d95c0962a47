"""Builds the `cortado` package with libcortado_c.so inside (configuration in
pyproject.toml). The library: $CORTADO_LIB if set, else build/ or
build-gpu/ of this repository; without one the build stops and says how to
make it. The wheel is tagged for this platform, as it holds a native
library; the library still needs what it was linked against (OpenBLAS,
protobuf, glog, and CUDA's libraries for a CUDA build) on the machine."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = "libcortado_c.so"


def find_library():
    env = os.environ.get("CORTADO_LIB")
    if env:
        if not os.path.isfile(env):
            raise SystemExit("CORTADO_LIB=%s: no such file" % env)
        return env
    for build in ("build", "build-gpu"):
        path = os.path.join(os.path.dirname(HERE), build, LIB)
        if os.path.isfile(path):
            return path
    raise SystemExit("%s not found in %s/build or build-gpu: build it first (cmake -S . -B build && cmake --build "
                     "build --target cortado_c), or set CORTADO_LIB to its path" % (LIB, os.path.dirname(HERE)))


def find_proto():
    """Cortado's schema, which cortado.caffe_files (the ONNX export, the
    torchvision converter) compiles: the repository's proto/cortado.proto,
    or $CORTADO_PROTO; None where neither is (the package then looks for an
    installed Cortado's share/cortado/cortado.proto at run time)."""
    for path in (os.environ.get("CORTADO_PROTO"), os.path.join(os.path.dirname(HERE), "proto", "cortado.proto")):
        if path and os.path.isfile(path):
            return path
    return None


class BuildPy(build_py):
    """Copies the library, and the schema, into the package beside __init__.py."""

    def run(self):
        super().run()
        self.copy_file(find_library(), os.path.join(self.build_lib, "cortado", LIB), preserve_mode=True)
        proto = find_proto()
        if proto:
            self.copy_file(proto, os.path.join(self.build_lib, "cortado", "cortado.proto"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel (the package holds a native library)


setup(cmdclass={"build_py": BuildPy}, distclass=BinaryDistribution)
