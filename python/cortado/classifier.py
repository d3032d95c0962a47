"""pycaffe's Classifier: a Net (deploy prototxt and weights, TEST phase)
that classifies H x W x C images, with the preprocessing of a Transformer.

    clf = cortado.Classifier("deploy.prototxt", "w.caffemodel", image_dims=(256, 256),
                             mean=np.array([104, 117, 123]), raw_scale=255, channel_swap=(2, 1, 0))
    probs = clf.predict([cortado.io.load_image("cat.jpg")])    # (1, classes)
"""
import numpy as np

from . import Net, TEST
from . import io as cio

__all__ = ["Classifier"]


class Classifier(Net):
    """image_dims: the size images are resized to before cropping (default
    the input's); mean, input_scale, raw_scale, channel_swap: as the
    Transformer's set_* (the transpose is (2, 0, 1) always). Extra keywords
    (gpu, precision, ...) go to Net."""

    def __init__(self, model_file, pretrained_file, image_dims=None, mean=None, input_scale=None, raw_scale=None,
                 channel_swap=None, **net_kwargs):
        Net.__init__(self, model_file, pretrained_file, TEST, **net_kwargs)
        in_ = self.inputs[0]
        self.transformer = cio.Transformer({in_: self.blobs[in_].shape})
        self.transformer.set_transpose(in_, (2, 0, 1))
        if mean is not None:
            self.transformer.set_mean(in_, mean)
        if input_scale is not None:
            self.transformer.set_input_scale(in_, input_scale)
        if raw_scale is not None:
            self.transformer.set_raw_scale(in_, raw_scale)
        if channel_swap is not None:
            self.transformer.set_channel_swap(in_, channel_swap)
        self.crop_dims = np.array(self.blobs[in_].shape[2:])
        self.image_dims = self.crop_dims if image_dims is None else np.array(image_dims)

    def predict(self, inputs, oversample=True):
        """Class scores (the net's first output) for a list of H x W x C
        images: (N, classes). oversample: the mean over ten crops (corners,
        centre, mirrors) of each image, else its centre crop."""
        if len(inputs) == 0:
            return np.zeros((0, 0), dtype=np.float32)
        in_ = self.inputs[0]
        images = [np.asarray(im, dtype=np.float32) for im in inputs]
        images = [im[:, :, np.newaxis] if im.ndim == 2 else im for im in images]
        input_ = np.zeros((len(images), int(self.image_dims[0]), int(self.image_dims[1]), images[0].shape[2]),
                          dtype=np.float32)
        for ix, im in enumerate(images):
            input_[ix] = cio.resize_image(im, self.image_dims)
        if oversample:
            input_ = cio.oversample(input_, self.crop_dims)
        else:
            center = np.array(self.image_dims) / 2.0
            crop = (np.tile(center, (1, 2))[0] + np.concatenate([-self.crop_dims / 2.0, self.crop_dims / 2.0]))
            crop = crop.astype(int)
            input_ = input_[:, crop[0]:crop[2], crop[1]:crop[3], :]
        caffe_in = np.zeros(np.array(input_.shape)[[0, 3, 1, 2]], dtype=np.float32)
        for ix, im in enumerate(input_):
            caffe_in[ix] = self.transformer.preprocess(in_, im)
        predictions = self.forward_all(**{in_: caffe_in})[self.outputs[0]]
        if oversample:
            predictions = predictions.reshape((len(predictions) // 10, 10, -1)).mean(1)
        return predictions
