"""Image input as pycaffe's caffe.io: Transformer (an image as the net's
input), load_image, resize_image, oversample.

    t = cortado.io.Transformer({"data": net.blobs["data"].data.shape})
    t.set_transpose("data", (2, 0, 1))       # H x W x C -> C x H x W
    t.set_channel_swap("data", (2, 1, 0))    # RGB -> BGR, as Caffe's models were trained
    t.set_raw_scale("data", 255)             # load_image gives [0, 1]; the model wants [0, 255]
    t.set_mean("data", np.array([104, 117, 123]))
    net.blobs["data"].data[...] = t.preprocess("data", cortado.io.load_image("cat.jpg"))

Images are numpy arrays H x W x C, float, in [0, 1] as load_image gives
them (pycaffe's convention, from scikit-image). preprocess runs, in order:
resize to the input's H x W, transpose, channel swap, raw scale, subtract
the mean, input scale; deprocess undoes them. Unlike pycaffe, preprocess
never writes into the array it is given. Needs numpy; load_image needs
Pillow (Debian: python3-pil) or, for PNG, matplotlib.
"""
import numpy as np

__all__ = ["Transformer", "load_image", "resize_image", "oversample"]


def _error(msg):
    from . import Error
    return Error(msg)


class Transformer:
    """Preprocessing for the inputs of a net: `inputs` maps an input name to
    its blob shape (N, C, H, W)."""

    def __init__(self, inputs):
        self.inputs = {k: tuple(int(d) for d in v) for k, v in inputs.items()}
        self.transpose, self.channel_swap, self.raw_scale, self.mean, self.input_scale = {}, {}, {}, {}, {}

    def _check(self, in_):
        if in_ not in self.inputs:
            raise _error("%s is not one of the net inputs: %s" % (in_, ", ".join(self.inputs)))

    def preprocess(self, in_, data):
        """An image (H x W x C) as the input blob wants one item (C x H x W)."""
        self._check(in_)
        x = np.array(data, dtype=np.float32)  # a copy: never the caller's array
        in_dims = self.inputs[in_][2:]
        if x.ndim == 2:
            x = x[:, :, np.newaxis]
        if tuple(x.shape[:2]) != tuple(in_dims):
            x = resize_image(x, in_dims)
        if in_ in self.transpose:
            x = x.transpose(self.transpose[in_])
        if in_ in self.channel_swap:
            x = x[list(self.channel_swap[in_]), :, :]
        if in_ in self.raw_scale:
            x = x * self.raw_scale[in_]
        if in_ in self.mean:
            x = x - self.mean[in_]
        if in_ in self.input_scale:
            x = x * self.input_scale[in_]
        return np.ascontiguousarray(x, dtype=np.float32)

    def deprocess(self, in_, data):
        """An input item (C x H x W) back as an image (H x W x C)."""
        self._check(in_)
        x = np.array(data, dtype=np.float32).squeeze()
        if in_ in self.input_scale:
            x = x / self.input_scale[in_]
        if in_ in self.mean:
            x = x + self.mean[in_]
        if in_ in self.raw_scale:
            x = x / self.raw_scale[in_]
        if in_ in self.channel_swap:
            x = x[np.argsort(self.channel_swap[in_]), :, :]
        if in_ in self.transpose:
            x = x.transpose(np.argsort(self.transpose[in_]))
        return x

    def set_transpose(self, in_, order):
        """The axis order from the image's (H, W, C) to the input's, e.g. (2, 0, 1)."""
        self._check(in_)
        if len(order) != len(self.inputs[in_]) - 1:
            raise _error("transpose order %s needs %d axes, as input '%s' of shape %s has per item"
                         % (tuple(order), len(self.inputs[in_]) - 1, in_, self.inputs[in_]))
        self.transpose[in_] = tuple(order)

    def set_channel_swap(self, in_, order):
        """A channel order, e.g. (2, 1, 0) for RGB to BGR; applied after the transpose."""
        self._check(in_)
        if len(order) != self.inputs[in_][1]:
            raise _error("channel swap %s needs %d channels, as input '%s' has"
                         % (tuple(order), self.inputs[in_][1], in_))
        self.channel_swap[in_] = tuple(order)

    def set_raw_scale(self, in_, scale):
        """A factor applied before the mean (255 for [0, 1] images and a model trained on [0, 255])."""
        self._check(in_)
        self.raw_scale[in_] = scale

    def set_mean(self, in_, mean):
        """A mean to subtract: one value per channel (C,) or per value (C, H, W)."""
        self._check(in_)
        mean = np.asarray(mean, dtype=np.float32)
        if mean.ndim == 1:
            if mean.shape[0] != self.inputs[in_][1]:
                raise _error("mean of %d channels, input '%s' has %d" % (mean.shape[0], in_, self.inputs[in_][1]))
            mean = mean[:, np.newaxis, np.newaxis]
        else:
            ms = mean.shape if mean.ndim != 2 else (1,) + mean.shape
            if len(ms) != 3 or tuple(ms) != self.inputs[in_][1:]:
                raise _error("mean of shape %s, input '%s' wants (C,) or %s" % (mean.shape, in_, self.inputs[in_][1:]))
            mean = mean.reshape(ms)
        self.mean[in_] = mean

    def set_input_scale(self, in_, scale):
        """A factor applied after the mean (Caffe's transform_param.scale)."""
        self._check(in_)
        self.input_scale[in_] = scale


def load_image(filename, color=True):
    """An image file as float32 H x W x 3 (color) or H x W x 1, values in
    [0, 1], as pycaffe's (which used scikit-image)."""
    try:
        from PIL import Image
        with Image.open(filename) as im:
            img = np.asarray(im.convert("RGB" if color else "L"), dtype=np.float32) / 255.0
    except ImportError:
        try:
            import matplotlib.image
        except ImportError:
            raise _error("load_image needs Pillow (Debian: python3-pil) or matplotlib") from None
        img = np.asarray(matplotlib.image.imread(filename), dtype=np.float32)
        if img.max() > 1.0:  # integer formats come back as 0..255
            img = img / 255.0
    except OSError as e:
        raise _error("%s: %s" % (filename, e)) from None
    if img.ndim == 2:
        img = img[:, :, np.newaxis]
        if color:
            img = np.tile(img, (1, 1, 3))
    elif img.shape[2] == 4:
        img = img[:, :, :3]
    if not color and img.shape[2] == 3:
        img = (img * np.array([0.299, 0.587, 0.114], dtype=np.float32)).sum(axis=2, keepdims=True)
    return img


def resize_image(im, new_dims, interp_order=1):
    """Resizes an H x W x K image to new_dims (H', W'): bilinear
    (interp_order 1) or nearest (0), pixel centres aligned as
    scikit-image's resize. Returns float32."""
    im = np.asarray(im, dtype=np.float32)
    h, w = im.shape[:2]
    nh, nw = int(new_dims[0]), int(new_dims[1])
    if (h, w) == (nh, nw):
        return im.copy()
    if im.size and im.min() == im.max():  # a constant image stays constant
        return np.full((nh, nw) + im.shape[2:], im.flat[0], dtype=np.float32)

    def coords(n_out, n_in):
        return np.clip((np.arange(n_out, dtype=np.float64) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)

    ys, xs = coords(nh, h), coords(nw, w)
    if interp_order == 0:
        return im[np.rint(ys).astype(int)][:, np.rint(xs).astype(int)].astype(np.float32)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    wy = (ys - y0).reshape((-1, 1) + (1,) * (im.ndim - 2))
    wx = (xs - x0).reshape((1, -1) + (1,) * (im.ndim - 2))
    top = im[y0][:, x0] * (1 - wx) + im[y0][:, x1] * wx
    bottom = im[y1][:, x0] * (1 - wx) + im[y1][:, x1] * wx
    return (top * (1 - wy) + bottom * wy).astype(np.float32)


def oversample(images, crop_dims):
    """Ten crops of each H x W x K image: the four corners and the centre,
    and their mirrors, as pycaffe's (N*10 x h x w x K)."""
    im_shape = np.array(images[0].shape)
    crop_dims = np.array(crop_dims)
    im_center = im_shape[:2] / 2.0
    h_indices = (0, im_shape[0] - crop_dims[0])
    w_indices = (0, im_shape[1] - crop_dims[1])
    crops_ix = np.empty((5, 4), dtype=int)
    curr = 0
    for i in h_indices:
        for j in w_indices:
            crops_ix[curr] = (i, j, i + crop_dims[0], j + crop_dims[1])
            curr += 1
    crops_ix[4] = np.tile(im_center, (1, 2)) + np.concatenate([-crop_dims / 2.0, crop_dims / 2.0])
    crops_ix = np.tile(crops_ix, (2, 1))
    crops = np.empty((10 * len(images), crop_dims[0], crop_dims[1], im_shape[-1]), dtype=np.float32)
    ix = 0
    for im in images:
        for crop in crops_ix:
            crops[ix] = im[crop[0]:crop[2], crop[1]:crop[3], :]
            ix += 1
        crops[ix - 5:ix] = crops[ix - 5:ix, :, ::-1, :]  # the mirrors
    return crops
