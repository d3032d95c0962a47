#!/usr/bin/env python3
"""Which prototxt files of a Caffe or NVCaffe checkout Cortado reads.

    scripts/check_caffe_models.py CAFFE_ROOT [--tool build/tools/check_prototxt] [--verbose]

Every *.prototxt under CAFFE_ROOT/models and CAFFE_ROOT/examples is read by
check_prototxt (tools/check_prototxt.cpp) as Cortado's commands read it:
parsed, upgraded from Caffe's older formats, its layer types looked up.
Files whose name contains "solver" are read as solvers, the others as nets
(run from CAFFE_ROOT, so the paths print as Caffe names them). The script
prints the counts (parsed, failed by a layer type Cortado does not have,
failed otherwise) and every file that failed otherwise, with its message;
--verbose also lists the unavailable ones. Exit status 1 when a file failed
otherwise, 0 when not. The checkout is only read: it is not part of Cortado.
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TOOL = os.path.join(HERE, "..", "build", "tools", "check_prototxt")


def find_prototxts(root):
    files = []
    for top in ("models", "examples"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(".prototxt"):
                    files.append(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(files)


def run_tool(tool, root, files, solver):
    """check_prototxt's verdicts: {file: (verdict, message)}."""
    if not files:
        return {}
    cmd = [tool] + (["--solver"] if solver else []) + files
    proc = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          universal_newlines=True)
    if proc.returncode not in (0, 1):
        sys.exit("check_caffe_models: %s exited with status %d" % (tool, proc.returncode))
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3 and parts[0] in ("OK", "UNAVAILABLE", "FAILED"):
            out[parts[1]] = (parts[0], parts[2])
    missing = [f for f in files if f not in out]
    if missing:
        sys.exit("check_caffe_models: no verdict for %s" % ", ".join(missing))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="a checkout of BVLC Caffe or NVCaffe")
    ap.add_argument("--tool", default=DEFAULT_TOOL, help="the check_prototxt executable")
    ap.add_argument("--verbose", action="store_true", help="also list the files with unavailable layer types")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    tool = os.path.abspath(args.tool)
    if not os.access(tool, os.X_OK):
        sys.exit("check_caffe_models: %s is not an executable (build the check_prototxt target)" % tool)
    files = find_prototxts(root)
    if not files:
        sys.exit("check_caffe_models: no .prototxt under %s/models or %s/examples" % (root, root))
    solvers = [f for f in files if "solver" in os.path.basename(f)]
    nets = [f for f in files if f not in set(solvers)]
    verdicts = run_tool(tool, root, nets, False)
    verdicts.update(run_tool(tool, root, solvers, True))

    by = {"OK": [], "UNAVAILABLE": [], "FAILED": []}
    for f in files:
        by[verdicts[f][0]].append(f)
    print("%s: %d prototxt files (%d nets, %d solvers)" % (root, len(files), len(nets), len(solvers)))
    print("  parsed:                          %d" % len(by["OK"]))
    print("  failed, layer type not in Cortado: %d" % len(by["UNAVAILABLE"]))
    print("  failed otherwise:                %d" % len(by["FAILED"]))
    if args.verbose:
        for f in by["UNAVAILABLE"]:
            print("UNAVAILABLE %s: %s" % (f, verdicts[f][1]))
    for f in by["FAILED"]:
        print("FAILED %s: %s" % (f, verdicts[f][1]))
    return 1 if by["FAILED"] else 0


if __name__ == "__main__":
    sys.exit(main())
