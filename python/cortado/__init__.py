"""Cortado from Python: nets and solvers with numpy arrays, in the manner of
Caffe's pycaffe, through Cortado's C interface (libcortado_c.so, ctypes).

    import sys; sys.path.insert(0, "python")
    import cortado
    net = cortado.Net("models/lenet/lenet_deploy.prototxt", "lenet_iter_2000.caffemodel", cortado.TEST)
    out = net.forward(data=images)             # {"prob": array of (N, 10)}
    net.blobs["conv1"].data                     # a copy, float32
    net.params["conv1"][0].data = w             # sets the weights
    solver = cortado.get_solver("models/lenet/solver.prototxt", precision="fp16")
    solver.step(100); solver.net.blobs["loss"].data

Values cross as float32 copies whatever the blob's storage type (FP16 and
BF16 blobs give their values widened; values set are kept as given, and a
16-bit layer rounds them to nearest when it reads them). Unlike pycaffe,
`.data` is a read-only copy: assign an array (`blob.data = x`, numpy's
broadcasting rules); `blob.data[...] = x` raises. Calls go through one lock,
so threads take turns, as pycaffe's calls under the GIL do.
Errors are cortado.Error with the trainer's message (file and line, layer,
field). The library is found through CORTADO_LIB, else in build/ next to
this folder. Needs numpy.
"""
import collections
import ctypes
import numbers
import os
import threading

import numpy as np

__all__ = ["Error", "Net", "Solver", "SGDSolver", "get_solver", "TRAIN", "TEST", "set_mode_cpu", "set_mode_gpu",
           "set_device", "set_random_seed", "device_count", "version"]

TRAIN, TEST = 0, 1
_MAX_AXES = 32


class Error(RuntimeError):
    """A Cortado error: bad input (a prototxt, a path, a shape) or a failed run."""


_lib = None
_mode_gpu, _device = False, 0  # where new nets and solvers run, as pycaffe's set_mode_* and set_device
# ctypes lets other Python threads run during a call; one lock keeps the C
# interface to one caller at a time, as pycaffe's calls under the GIL are.
_lock = threading.RLock()


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
        "cortado_net_open_precision": (P, [S, I, S, I, S]), "cortado_net_close": (None, [P]),
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
        "cortado_solver_open_precision": (P, [S, I, S]), "cortado_solver_close": (None, [P]),
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


def _call(name, *args):
    """Calls the C function `name` under the lock."""
    with _lock:
        return getattr(_L(), name)(*args)


def _text(b):
    return "" if b is None else b.decode("utf-8", "replace")


def _error():
    return Error(_text(_L().cortado_last_error()))


def _check(status):
    if status != 0:
        raise _error()


def _checked(name, *args):
    """Calls `name` under the lock; raises Error (with its message) on failure."""
    with _lock:
        if getattr(_L(), name)(*args) != 0:
            raise _error()


def _enc(s):
    return None if s is None else os.fsencode(s)


def _int(v, what, low, high=2 ** 31 - 1):
    if not isinstance(v, numbers.Integral) or not low <= int(v) <= high:
        raise Error("%s must be an integer in [%d, %d], got %r" % (what, low, high, v))
    return int(v)


def version():
    return _text(_call("cortado_version"))


def set_random_seed(seed):
    """Seeds this thread's generator (fillers, dropout, data order)."""
    _call("cortado_set_random_seed", _int(seed, "seed", 0, 2 ** 64 - 1))


def device_count():
    return _call("cortado_device_count")


def set_mode_cpu():
    global _mode_gpu
    _mode_gpu = False


def set_mode_gpu():
    global _mode_gpu
    _mode_gpu = True


def set_device(device):
    """The GPU of new nets and solvers once set_mode_gpu() is on."""
    global _device
    _device = _int(device, "device", 0)


def _default_gpu():
    return _device if _mode_gpu else -1


class _Ref:
    """A C handle, closed by `close_fn` when the last object using it goes. A
    solver's net has the solver's _Ref as `parent`: the solver closes it, and
    the net keeps the solver alive."""

    def __init__(self, handle, close_fn, what, parent=None):
        self.h, self.close_fn, self.what, self.parent = handle, close_fn, what, parent

    def get(self):
        if not self.h or (self.parent is not None and not self.parent.h):
            raise Error("the %s is closed" % self.what)
        return self.h

    def close(self):
        if self.h and self.parent is None:
            _call(self.close_fn, self.h)
        self.h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Blob:
    """A blob of a net: by name (layer < 0) or as parameter `param` of layer `layer`."""

    def __init__(self, ref, name=None, layer=-1, param=0):
        self._ref, self._name, self._layer, self._param = ref, name, layer, param

    def _args(self):
        return self._ref.get(), _enc(self._name), self._layer, self._param

    @property
    def shape(self):
        axes = _MAX_AXES
        while True:
            dims = (ctypes.c_int * axes)()
            with _lock:
                n = _L().cortado_blob_shape(*self._args(), dims, axes)
                if n < 0:
                    raise _error()
            if n <= axes:
                return tuple(dims[i] for i in range(n))
            axes = n

    @property
    def count(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def _get(self, diff):
        out = np.empty(self.shape, dtype=np.float32)
        _checked("cortado_blob_get", *self._args(), diff, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                 out.size)
        # Read-only: pycaffe's `blob.data[...] = x` would change only this
        # copy, so it raises instead of doing nothing.
        out.flags.writeable = False
        return out

    def _set(self, diff, value):
        shape = self.shape
        try:
            v = np.broadcast_to(np.asarray(value, dtype=np.float32), shape)  # numpy's rules, no silent reshape
        except ValueError:
            raise Error("blob '%s' has shape %s; cannot set an array of shape %s"
                        % (self._name or "param", shape, np.shape(value))) from None
        v = np.ascontiguousarray(v)
        _checked("cortado_blob_set", *self._args(), diff, v.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), v.size)

    data = property(lambda self: self._get(0), lambda self, v: self._set(0, v), doc="the values (a float32 copy)")
    diff = property(lambda self: self._get(1), lambda self, v: self._set(1, v), doc="the gradients (a float32 copy)")

    def reshape(self, *dims):
        """Reshapes a named blob (an input); the layers follow at the next
        forward (or net.reshape())."""
        if self._name is None:
            raise Error("only named blobs (inputs) can be reshaped")
        arr = (ctypes.c_int * len(dims))(*[_int(d, "a dimension", 0) for d in dims])
        _checked("cortado_blob_reshape", self._ref.get(), _enc(self._name), arr, len(dims))

    def __repr__(self):
        return "<cortado.Blob %s %s>" % (self._name or "param", self.shape)


class Net:
    """A net from a prototxt: Net(model, [weights], phase) as pycaffe, or with
    keywords (phase=TEST, weights=None, gpu: a device, -1 the CPU; default
    from set_mode_* and set_device; precision: "fp32", "fp16" or "bf16" as
    trainer --precision, None the file's own types)."""

    def __init__(self, model, *args, phase=None, weights=None, gpu=None, precision=None, _ref=None):
        for a in args:
            if isinstance(a, numbers.Integral):
                phase = a
            else:
                weights = a
        if _ref is None:
            phase = _int(TEST if phase is None else phase, "phase", TRAIN, TEST)
            gpu = _int(_default_gpu() if gpu is None else gpu, "gpu", -1)
            with _lock:
                h = _L().cortado_net_open_precision(_enc(model), phase, _enc(weights), gpu, _enc(precision))
                if not h:
                    raise _error()
            _ref = _Ref(h, "cortado_net_close", "net")
        self._ref = _ref
        h = _ref.get()
        with _lock:
            L = _L()
            blob_names = [_text(L.cortado_net_blob_name(h, i)) for i in range(L.cortado_net_num_blobs(h))]
            n_layers = L.cortado_net_num_layers(h)
            self.layer_names = [_text(L.cortado_net_layer_name(h, i)) for i in range(n_layers)]
            self.layer_types = [_text(L.cortado_net_layer_type(h, i)) for i in range(n_layers)]
            self.inputs = [_text(L.cortado_net_input_name(h, i)) for i in range(L.cortado_net_num_inputs(h))]
            self.outputs = [_text(L.cortado_net_output_name(h, i)) for i in range(L.cortado_net_num_outputs(h))]
            num_params = [L.cortado_net_layer_num_params(h, i) for i in range(n_layers)]
        # Blobs refer to the handle, not to the Net: no reference cycle, so a
        # net is freed as soon as nothing uses it.
        self.blobs = collections.OrderedDict((n, Blob(_ref, n)) for n in blob_names)
        self.params = collections.OrderedDict(
            (name, [Blob(_ref, None, i, j) for j in range(k)])
            for i, (name, k) in enumerate(zip(self.layer_names, num_params)) if k > 0)
        self.loss = None

    def forward(self, **inputs):
        """Sets the given input blobs (reshaping them to the arrays; the
        layers follow), runs forward, and returns {output name: values}."""
        for name in inputs:
            if name not in self.inputs:
                raise Error("'%s' is not an input of the net (inputs: %s)" % (name, ", ".join(self.inputs) or "none"))
        for name, value in inputs.items():
            v = np.asarray(value, dtype=np.float32)
            if v.shape != self.blobs[name].shape:
                self.blobs[name].reshape(*v.shape)
            self.blobs[name].data = v
        loss = ctypes.c_double()
        _checked("cortado_net_forward", self._ref.get(), ctypes.byref(loss))
        self.loss = loss.value
        return collections.OrderedDict((n, self.blobs[n].data) for n in self.outputs)

    def backward(self):
        """Runs backward (after a forward); returns {input name: gradient}."""
        _checked("cortado_net_backward", self._ref.get())
        return collections.OrderedDict((n, self.blobs[n].diff) for n in self.inputs)

    def reshape(self):
        _checked("cortado_net_reshape", self._ref.get())

    def copy_from(self, weights):
        """Loads weights by layer name (.caffemodel, or .h5 for HDF5)."""
        _checked("cortado_net_copy_weights", self._ref.get(), _enc(weights))

    def save(self, path):
        """Writes the weights (.h5: HDF5, else a binary .caffemodel)."""
        _checked("cortado_net_save", self._ref.get(), _enc(path))

    def close(self):
        """Frees the net now (a solver's nets go with the solver)."""
        self._ref.close()


class Solver:
    """A solver from a solver prototxt (its `type` picks the rule: SGD, Adam, ...);
    precision: "fp32", "fp16" or "bf16" as trainer --precision (its nets and
    the solver), None the files' own types."""

    def __init__(self, solver_file, gpu=None, precision=None):
        gpu = _int(_default_gpu() if gpu is None else gpu, "gpu", -1)
        with _lock:
            h = _L().cortado_solver_open_precision(_enc(solver_file), gpu, _enc(precision))
            if not h:
                raise _error()
            self._ref = _Ref(h, "cortado_solver_close", "solver")
            net = _L().cortado_solver_net(h)
            tests = [_L().cortado_solver_test_net(h, i) for i in range(_L().cortado_solver_num_test_nets(h))]
        self.net = Net(None, _ref=_Ref(net, "cortado_net_close", "net", self._ref))
        self.test_nets = [Net(None, _ref=_Ref(t, "cortado_net_close", "net", self._ref)) for t in tests]

    def step(self, iters):
        _checked("cortado_solver_step", self._ref.get(), _int(iters, "iters", 0))

    def solve(self, resume=None):
        _checked("cortado_solver_solve", self._ref.get(), _enc(resume))

    def restore(self, state):
        _checked("cortado_solver_restore", self._ref.get(), _enc(state))

    def snapshot(self):
        _checked("cortado_solver_snapshot", self._ref.get())

    @property
    def iter(self):
        return _call("cortado_solver_iter", self._ref.get())

    def close(self):
        """Frees the solver and its nets now."""
        self._ref.close()


SGDSolver = Solver


def get_solver(solver_file, precision=None):
    return Solver(solver_file, precision=precision)
