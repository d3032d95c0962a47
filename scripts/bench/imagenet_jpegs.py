#!/usr/bin/env python3
"""Writes N ImageNet-like JPEG files and their list (list.txt: "NAME LABEL").

The recipe of scripts/bench/imagenet_data.sh: sizes spread around ImageNet's
average of about 400x350 (area log-normal, 70% landscape 1.2-1.6:1, 20%
portrait, 10% near square), photo-like content (1/f noise colour fields plus
sensor grain), quality 90 with 4:2:0 chroma (PIL's defaults), about 110 KB a
file. Needs numpy and PIL.

Usage: imagenet_jpegs.py FOLDER N
"""
import os
import sys

import numpy as np
from PIL import Image


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1)
    with open(os.path.join(out, "list.txt"), "w") as lst:
        for i in range(n):
            kind = rng.random()
            lo, hi = (1.2, 1.6) if kind < 0.7 else (0.6, 0.85) if kind < 0.9 else (0.9, 1.1)
            aspect = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
            area = 400 * 350 * float(np.exp(rng.normal(0, 0.35)))
            w = min(max(int(round(np.sqrt(area * aspect))), 160), 1000)
            h = min(max(int(round(np.sqrt(area / aspect))), 120), 1000)
            # 1/f^0.8 amplitude spectrum: a shared field for the shape, one
            # per channel for colour; then grain.
            fy = np.fft.fftfreq(h)[:, None]
            fx = np.fft.rfftfreq(w)[None, :]
            f = np.sqrt(fx * fx + fy * fy)
            f[0, 0] = 1.0
            amp = f ** -0.8

            def field():
                return np.fft.irfft2(amp * np.exp(2j * np.pi * rng.random((h, w // 2 + 1))), s=(h, w))

            base = field()
            img = np.stack([base + 0.5 * field() for _ in range(3)], -1)
            img = (img - img.mean()) / (img.std() + 1e-9) * 60 + rng.uniform(90, 150, 3)
            img += rng.normal(0, 16, img.shape)
            name = "img%05d.JPEG" % i
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(os.path.join(out, name), quality=90)
            lst.write("%s %d\n" % (name, i % 1000))


if __name__ == "__main__":
    main()
