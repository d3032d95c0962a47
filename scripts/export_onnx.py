#!/usr/bin/env python3
"""Exports a deploy prototxt and its .caffemodel to ONNX (docs/onnx.md):

    python3 scripts/export_onnx.py --model=models/resnet50/deploy.prototxt \
        --weights=resnet50.caffemodel --output=resnet50.onnx [--batch=1] [--fp16]

The work is python/cortado/onnx_export.py's. Needs Debian's python3-onnx,
python3-protobuf, python3-numpy and protoc (scripts/install_deps.sh).
"""
import os
import subprocess
import sys

try:
    import numpy  # noqa: F401
    import onnx  # noqa: F401
    import google.protobuf  # noqa: F401
except ImportError as e:
    # Another python3 ahead of Debian's on the PATH (a virtualenv, pyenv)
    # may lack Debian's packages: run under Debian's where it has them.
    debian = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(debian) and os.path.exists(debian) and subprocess.run(
            [debian, "-c", "import numpy, onnx, google.protobuf"], stderr=subprocess.DEVNULL).returncode == 0:
        os.execv(debian, [debian] + sys.argv)
    sys.exit("export_onnx: %s (Debian: python3-onnx python3-protobuf python3-numpy; scripts/install_deps.sh)" % e)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from cortado import onnx_export  # noqa: E402

if __name__ == "__main__":
    sys.exit(onnx_export.main())
