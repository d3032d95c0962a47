"""Cortado from Python: nets and solvers with numpy arrays, in the manner of
Caffe's pycaffe, through Cortado's C interface (libcortado_c.so, ctypes).

    import sys; sys.path.insert(0, "python")
    import cortado
    net = cortado.Net("models/lenet/lenet_deploy.prototxt", "lenet_iter_2000.caffemodel", cortado.TEST)
    out = net.forward(data=images)             # {"prob": array of (N, 10)}
    net.blobs["conv1"].data                     # a copy, float32
    net.params["conv1"][0].data = w             # sets the weights
    solver = cortado.get_solver("models/lenet/solver_fp16.prototxt")
    solver.step(100); solver.net.blobs["loss"].data

Values cross as float32 copies whatever the blob's storage type (FP16 and
BF16 blobs give their values widened; values set are kept as given, and a
16-bit layer rounds them to nearest when it reads them). Unlike pycaffe,
`.data` is a copy: assign a whole array (`blob.data = x`) rather than
writing into it.
Errors are cortado.Error with the trainer's message (file and line, layer,
field). The library is found through CORTADO_LIB, else in build/ next to
this folder. Needs numpy.
"""
import collections
import ctypes
import os

import numpy as np

__all__ = ["Error", "Net", "Solver", "SGDSolver", "get_solver", "TRAIN", "TEST", "set_mode_cpu", "set_mode_gpu",
           "set_device", "set_random_seed", "device_count", "version"]

TRAIN, TEST = 0, 1
_MAX_AXES = 32


class Error(RuntimeError):
    """A Cortado error: bad input (a prototxt, a path, a shape) or a failed run."""


_lib = None
_gpu = -1  # the device of new nets and solvers (-1: the CPU), as pycaffe's set_mode_*


def _library_path():
    env = os.environ.get("CORTADO_LIB")
    if env:
        if not os.path.exists(env):
            raise Error("CORTADO_LIB=%s: no such file" % env)
        return env
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for build in ("build", "build-gpu"):
        path = os.path.join(root, build, "libcortado_c.so")
        if os.path.exists(path):
            return path
    raise Error("cannot find libcortado_c.so: build Cortado (scripts/build.sh), or set CORTADO_LIB to its path")


def _L():
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(_library_path())
    P, S, I, I64, F = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_float)
    sigs = {
        "cortado_last_error": (S, []), "cortado_version": (S, []),
        "cortado_set_random_seed": (None, [ctypes.c_uint64]), "cortado_device_count": (I, []),
        "cortado_net_open": (P, [S, I, S, I]), "cortado_net_close": (None, [P]),
        "cortado_net_forward": (I, [P, ctypes.POINTER(ctypes.c_double)]), "cortado_net_backward": (I, [P]),
        "cortado_net_reshape": (I, [P]), "cortado_net_copy_weights": (I, [P, S]), "cortado_net_save": (I, [P, S]),
        "cortado_net_num_blobs": (I, [P]), "cortado_net_blob_name": (S, [P, I]),
        "cortado_net_num_layers": (I, [P]), "cortado_net_layer_name": (S, [P, I]),
        "cortado_net_layer_type": (S, [P, I]), "cortado_net_layer_num_params": (I, [P, I]),
        "cortado_net_num_inputs": (I, [P]), "cortado_net_input_name": (S, [P, I]),
        "cortado_net_num_outputs": (I, [P]), "cortado_net_output_name": (S, [P, I]),
        "cortado_blob_shape": (I, [P, S, I, I, ctypes.POINTER(I), I]),
        "cortado_blob_get": (I, [P, S, I, I, I, F, I64]), "cortado_blob_set": (I, [P, S, I, I, I, F, I64]),
        "cortado_blob_reshape": (I, [P, S, ctypes.POINTER(I), I]),
        "cortado_solver_open": (P, [S, I]), "cortado_solver_close": (None, [P]),
        "cortado_solver_step": (I, [P, I]), "cortado_solver_solve": (I, [P, S]),
        "cortado_solver_restore": (I, [P, S]), "cortado_solver_snapshot": (I, [P]),
        "cortado_solver_iter": (I, [P]), "cortado_solver_net": (P, [P]),
        "cortado_solver_num_test_nets": (I, [P]), "cortado_solver_test_net": (P, [P, I]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib = lib
    return lib


def _check(status):
    if status != 0:
        raise Error(_L().cortado_last_error().decode())


def _enc(s):
    return None if s is None else os.fsencode(s)


def version():
    return _L().cortado_version().decode()


def set_random_seed(seed):
    _L().cortado_set_random_seed(int(seed))


def device_count():
    return _L().cortado_device_count()


def set_mode_cpu():
    global _gpu
    _gpu = -1


def set_mode_gpu():
    global _gpu
    if _gpu < 0:
        _gpu = 0


def set_device(device):
    global _gpu
    _gpu = int(device)


class Blob:
    """A blob of a net: by name (layer < 0) or as parameter `param` of layer `layer`."""

    def __init__(self, net, name=None, layer=-1, param=0):
        self._net, self._name, self._layer, self._param = net, name, layer, param

    def _args(self):
        return self._net._handle(), _enc(self._name), self._layer, self._param

    @property
    def shape(self):
        dims = (ctypes.c_int * _MAX_AXES)()
        n = _L().cortado_blob_shape(*self._args(), dims, _MAX_AXES)
        if n < 0:
            raise Error(_L().cortado_last_error().decode())
        return tuple(dims[i] for i in range(n))

    @property
    def count(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def _get(self, diff):
        out = np.empty(self.shape, dtype=np.float32)
        _check(_L().cortado_blob_get(*self._args(), diff, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                     out.size))
        return out

    def _set(self, diff, value):
        shape = self.shape
        v = np.asarray(value, dtype=np.float32)
        if v.shape != shape:
            count = int(np.prod(shape, dtype=np.int64))
            if v.size == 1:
                v = np.full(shape, v.reshape(()), dtype=np.float32)  # one value for every element
            elif v.size == count:
                v = v.reshape(shape)
            else:
                raise Error("blob '%s' has shape %s; cannot set %d values of shape %s"
                            % (self._name or "param", shape, v.size, v.shape))
        v = np.ascontiguousarray(v)
        _check(_L().cortado_blob_set(*self._args(), diff, v.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), v.size))

    data = property(lambda self: self._get(0), lambda self, v: self._set(0, v), doc="the values (a float32 copy)")
    diff = property(lambda self: self._get(1), lambda self, v: self._set(1, v), doc="the gradients (a float32 copy)")

    def reshape(self, *dims):
        """Reshapes a named blob (an input); the layers follow at the next
        forward (or net.reshape())."""
        if self._name is None:
            raise Error("only named blobs (inputs) can be reshaped")
        arr = (ctypes.c_int * len(dims))(*[int(d) for d in dims])
        _check(_L().cortado_blob_reshape(self._net._handle(), _enc(self._name), arr, len(dims)))

    def __repr__(self):
        return "<cortado.Blob %s %s>" % (self._name or "param", self.shape)


class Net:
    """A net from a prototxt: Net(model, [weights], phase) as pycaffe, or with
    keywords (phase=TEST, weights=None, gpu: a device, -1 the CPU; default
    from set_mode_*)."""

    def __init__(self, model, *args, phase=None, weights=None, gpu=None, _handle=None, _owner=None):
        for a in args:
            if isinstance(a, int):
                phase = a
            else:
                weights = a
        self._owner = _owner
        if _handle is not None:
            self._h = _handle
        else:
            phase = TEST if phase is None else phase
            gpu = _gpu if gpu is None else gpu
            self._h = _L().cortado_net_open(_enc(model), int(phase), _enc(weights), int(gpu))
            if not self._h:
                raise Error(_L().cortado_last_error().decode())
        L = _L()
        self._blob_names = [L.cortado_net_blob_name(self._h, i).decode() for i in range(L.cortado_net_num_blobs(self._h))]
        n_layers = L.cortado_net_num_layers(self._h)
        self.layer_names = [L.cortado_net_layer_name(self._h, i).decode() for i in range(n_layers)]
        self.layer_types = [L.cortado_net_layer_type(self._h, i).decode() for i in range(n_layers)]
        self.inputs = [L.cortado_net_input_name(self._h, i).decode() for i in range(L.cortado_net_num_inputs(self._h))]
        self.outputs = [L.cortado_net_output_name(self._h, i).decode()
                        for i in range(L.cortado_net_num_outputs(self._h))]
        self.blobs = collections.OrderedDict((n, Blob(self, n)) for n in self._blob_names)
        self.params = collections.OrderedDict()
        for i, name in enumerate(self.layer_names):
            k = L.cortado_net_layer_num_params(self._h, i)
            if k > 0:
                self.params[name] = [Blob(self, None, i, j) for j in range(k)]

    def _handle(self):
        if not self._h:
            raise Error("the net is closed")
        return self._h

    def forward(self, **inputs):
        """Sets the given blobs (reshaping the net where a shape changes),
        runs forward, and returns {output name: values}."""
        for name, value in inputs.items():
            if name not in self.blobs:
                raise Error("net has no blob '%s' (inputs: %s)" % (name, ", ".join(self.inputs)))
            v = np.asarray(value, dtype=np.float32)
            if v.shape != self.blobs[name].shape:
                self.blobs[name].reshape(*v.shape)
            self.blobs[name].data = v
        loss = ctypes.c_double()
        _check(_L().cortado_net_forward(self._handle(), ctypes.byref(loss)))
        self.loss = loss.value
        return collections.OrderedDict((n, self.blobs[n].data) for n in self.outputs)

    def backward(self):
        """Runs backward; returns {input name: gradient}."""
        _check(_L().cortado_net_backward(self._handle()))
        return collections.OrderedDict((n, self.blobs[n].diff) for n in self.inputs)

    def reshape(self):
        _check(_L().cortado_net_reshape(self._handle()))

    def copy_from(self, weights):
        """Loads weights by layer name (.caffemodel, or .h5 for HDF5)."""
        _check(_L().cortado_net_copy_weights(self._handle(), _enc(weights)))

    def save(self, path):
        """Writes the weights (.h5: HDF5, else a binary .caffemodel)."""
        _check(_L().cortado_net_save(self._handle(), _enc(path)))

    def close(self):
        if self._h and self._owner is None:
            _L().cortado_net_close(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Solver:
    """A solver from a solver prototxt (its `type` picks the rule: SGD, Adam, ...)."""

    def __init__(self, solver_file, gpu=None):
        gpu = _gpu if gpu is None else gpu
        self._h = _L().cortado_solver_open(_enc(solver_file), int(gpu))
        if not self._h:
            raise Error(_L().cortado_last_error().decode())
        L = _L()
        self.net = Net(None, _handle=L.cortado_solver_net(self._h), _owner=self)
        self.test_nets = [Net(None, _handle=L.cortado_solver_test_net(self._h, i), _owner=self)
                          for i in range(L.cortado_solver_num_test_nets(self._h))]

    def step(self, iters):
        _check(_L().cortado_solver_step(self._h, int(iters)))

    def solve(self, resume=None):
        _check(_L().cortado_solver_solve(self._h, _enc(resume)))

    def restore(self, state):
        _check(_L().cortado_solver_restore(self._h, _enc(state)))

    def snapshot(self):
        _check(_L().cortado_solver_snapshot(self._h))

    @property
    def iter(self):
        return _L().cortado_solver_iter(self._h)

    def close(self):
        if self._h:
            for n in [self.net] + self.test_nets:
                n._h = None
            _L().cortado_solver_close(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


SGDSolver = Solver


def get_solver(solver_file):
    return Solver(solver_file)
