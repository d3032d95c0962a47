"""Cortado from Python: nets and solvers with numpy arrays, in the manner of
Caffe's pycaffe, through Cortado's C interface (libcortado_c.so, ctypes).

    import cortado                     # or: import cortado as caffe
    net = cortado.Net("models/lenet/lenet_deploy.prototxt", "lenet_iter_2000.caffemodel", cortado.TEST)
    net.blobs["data"].data[...] = images       # a numpy view of the blob's memory
    out = net.forward()                         # {"prob": view of (N, 10)}
    net.params["conv1"][0].data[...] *= 0.5     # changes the next forward
    solver = cortado.get_solver("models/lenet/solver.prototxt", precision="fp16")
    solver.step(100); solver.net.blobs["loss"].data

Arrays: `blob.data` and `blob.diff` are float32 numpy arrays over the blob's
host memory, writable, as pycaffe's. For a blob held in FP32 they are its
own memory; for one held in FP16 or BF16 they are its float32 companion
buffer (the one FP32 master weights live in), converted at the boundaries:
a write reaches the next pass (a 16-bit layer rounds it to nearest when it
reads it) and a pass's results show in the array after it. On a GPU net the
arrays are the host copy: before each forward, backward or solver call the
values of every array still alive are uploaded, after it they are
downloaded (only those arrays; drop an array to stop its transfers). An
array stays valid while its net lives, until a reshape gives its blob more
values (then read `.data` again; the old array must not be used), and not
after net.close() or solver.close(). Calls go through one lock, so threads
take turns, as pycaffe's calls under the GIL do.

Errors are cortado.Error with the trainer's message (file and line, layer,
field). The library: CORTADO_LIB if set, else the copy installed inside the
package (pip install ./python), else build/ next to this folder. Needs numpy.
"""
import collections
import ctypes
import numbers
import os
import threading
import weakref

import numpy as np

__all__ = ["Error", "Net", "Blob", "Layer", "Solver", "SGDSolver", "NesterovSolver", "AdaGradSolver",
           "RMSPropSolver", "AdaDeltaSolver", "AdamSolver", "get_solver", "TRAIN", "TEST", "set_mode_cpu",
           "set_mode_gpu", "set_device", "set_random_seed", "device_count", "version", "Classifier", "io",
           "draw_net", "draw_net_to_file"]

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
    """CORTADO_LIB if set (an explicit choice wins: tests and GPU builds name
    theirs), else the library installed inside this package (pip install
    ./python), else build/ or build-gpu/ of the repository holding python/."""
    env = os.environ.get("CORTADO_LIB")
    if env:
        if not os.path.exists(env):
            raise Error("CORTADO_LIB=%s: no such file" % env)
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "libcortado_c.so")
    if os.path.exists(bundled):
        return bundled
    root = os.path.dirname(os.path.dirname(here))
    for build in ("build", "build-gpu"):
        path = os.path.join(root, build, "libcortado_c.so")
        if os.path.exists(path):
            return path
    raise Error("cannot find libcortado_c.so: install the package with the library inside (pip install ./python "
                "after building), build Cortado (cmake --build build --target cortado_c), or set CORTADO_LIB "
                "to its path")


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
        "cortado_blob_host_view": (I, [P, S, I, I, I, I, ctypes.POINTER(F), ctypes.POINTER(I64)]),
        "cortado_net_forward_range": (I, [P, I, I, ctypes.POINTER(ctypes.c_double)]),
        "cortado_net_backward_range": (I, [P, I, I]),
        "cortado_net_layer_num_bottoms": (I, [P, I]), "cortado_net_layer_bottom_name": (S, [P, I, I]),
        "cortado_net_layer_num_tops": (I, [P, I]), "cortado_net_layer_top_name": (S, [P, I, I]),
        "cortado_net_open_state": (P, [S, I, S, I, S, I, ctypes.POINTER(S), I]),
        "cortado_net_open_switches": (P, [S, I, S, I, S, I, ctypes.POINTER(S), I, ctypes.POINTER(S),
                                          ctypes.POINTER(S), I]),
        "cortado_solver_open_switches": (P, [S, I, S, ctypes.POINTER(S), ctypes.POINTER(S), I]),
        "cortado_set_switch": (I, [S, S]),
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


def __getattr__(name):  # cortado.__version__ asks the library (loaded on first use)
    if name == "__version__":
        return version()
    raise AttributeError("module 'cortado' has no attribute %r" % name)


def set_random_seed(seed):
    """Seeds this thread's generator (fillers, dropout, data order)."""
    _call("cortado_set_random_seed", _int(seed, "seed", 0, 2 ** 64 - 1))


def device_count():
    return _call("cortado_device_count")


def _switch_text(value):
    return "1" if value is True else "0" if value is False else str(value)


def _switches(switches):
    """The C arrays of names and values of a switches dict, and their count."""
    items = list((switches or {}).items())
    names = (ctypes.c_char_p * max(1, len(items)))(*[_enc(str(k)) for k, _ in items])
    values = (ctypes.c_char_p * max(1, len(items)))(*[_enc(_switch_text(v)) for _, v in items])
    return names, values, len(items)


def set_cpu_share(on):
    """The process's switch cpu_share (trainer --cpu_share): True, the
    default, lets CPU layers follow the cores other processes leave free;
    False runs them on every thread, and the fully connected GEMMs on
    OpenBLAS's threads."""
    _checked("cortado_set_switch", b"cpu_share", _enc(_switch_text(bool(on))))


def set_cpu_bf16_dot(on):
    """The process's switch cpu_bf16_dot (trainer --cpu_bf16_dot): True, the
    default, runs BF16 CPU GEMMs on AVX-512 BF16 where the CPU has it; False
    widens their operands to FP32."""
    _checked("cortado_set_switch", b"cpu_bf16_dot", _enc(_switch_text(bool(on))))


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

    def alive(self):
        return bool(self.h) and (self.parent is None or bool(self.parent.h))

    def root(self):
        """The handle whose calls run this one's passes (a solver for its nets)."""
        return self.parent if self.parent is not None else self

    def close(self):
        if self.h and self.parent is None:
            _call(self.close_fn, self.h)
        self.h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# ---- Arrays over blob memory ---------------------------------------------------------------------
#
# Every array that .data or .diff hands out has a _View as its numpy base:
# the view keeps the net alive, and _views (weak) lists the views alive, so
# that each call that runs passes (forward, backward, solver calls, saving)
# first makes their host memory the blob's newest values (writes reach the
# pass; on a GPU this uploads) and afterwards brings the pass's results back
# into it (downloads, or converts from FP16/BF16). Arrays the caller dropped
# cost nothing.

_views = weakref.WeakSet()


def _host_view(ref, name, layer, param, diff, writable):
    """(address, count) of the blob's float32 host array (cortado_blob_host_view)."""
    ptr, count = ctypes.POINTER(ctypes.c_float)(), ctypes.c_int64()
    if _L().cortado_blob_host_view(ref.get(), _enc(name), layer, param, diff, int(writable), ctypes.byref(ptr),
                                   ctypes.byref(count)) != 0:
        raise _error()
    return ctypes.cast(ptr, ctypes.c_void_p).value or 0, count.value


class _View:
    """The numpy base of an array over blob memory."""

    def __init__(self, ref, key, addr, shape):
        self.ref, self.key, self.addr = ref, key, addr
        self.__array_interface__ = {"version": 3, "shape": tuple(shape), "typestr": "<f4", "data": (addr, False)}

    def sync(self, before):
        """Before a pass: the array's values become the blob's; after: the
        blob's values are brought to the array. A view whose blob moved (it
        grew) is dropped: its array is stale (documented)."""
        if not self.ref.alive():
            _views.discard(self)
            return
        addr, _ = _host_view(self.ref, *self.key, writable=before)
        if addr != self.addr:
            _views.discard(self)


def _run(ref, name, *args):
    """Calls the C function `name` (a pass: forward, backward, a solver call,
    saving or loading weights) on handle `ref` with the live arrays of the
    same net or solver synced around it; raises Error on failure."""
    with _lock:
        root = ref.root()
        live = [v for v in list(_views) if v.ref.root() is root]
        for v in live:
            v.sync(True)
        try:
            status = getattr(_L(), name)(ref.get(), *args)
            error = _error() if status != 0 else None
        finally:
            for v in live:
                v.sync(False)
        if error is not None:
            raise error


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

    def _axis(self, i):
        shape = self.shape
        return shape[i] if i < len(shape) else 1

    num = property(lambda self: self._axis(0), doc="axis 0 (pycaffe's num)")
    channels = property(lambda self: self._axis(1), doc="axis 1")
    height = property(lambda self: self._axis(2), doc="axis 2")
    width = property(lambda self: self._axis(3), doc="axis 3")

    def _view(self, diff):
        """A writable float32 array over the blob's host memory (see the module's notes)."""
        with _lock:
            shape = self.shape
            key = (self._name, self._layer, self._param, diff)
            addr, count = _host_view(self._ref, *key, writable=True)
            if count == 0 or not addr:
                return np.zeros(shape, dtype=np.float32)
            view = _View(self._ref, key, addr, shape)
            _views.add(view)
        return np.asarray(view)

    def _set(self, diff, value):
        shape = self.shape
        try:
            v = np.broadcast_to(np.asarray(value, dtype=np.float32), shape)  # numpy's rules, no silent reshape
        except ValueError:
            raise Error("blob '%s' has shape %s; cannot set an array of shape %s"
                        % (self._name or "param", shape, np.shape(value))) from None
        v = np.ascontiguousarray(v)
        _checked("cortado_blob_set", *self._args(), diff, v.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), v.size)

    data = property(lambda self: self._view(0), lambda self, v: self._set(0, v),
                    doc="the values: a float32 array over the blob's memory (writable; assigning sets them too)")
    diff = property(lambda self: self._view(1), lambda self, v: self._set(1, v),
                    doc="the gradients: a float32 array over the blob's memory (writable)")

    def reshape(self, *dims):
        """Reshapes a named blob (an input); the layers follow at the next
        forward (or net.reshape()). Arrays taken before may be stale."""
        if len(dims) == 1 and not isinstance(dims[0], numbers.Integral):
            dims = tuple(dims[0])
        if self._name is None:
            raise Error("only named blobs (inputs) can be reshaped")
        arr = (ctypes.c_int * len(dims))(*[_int(d, "a dimension", 0) for d in dims])
        _checked("cortado_blob_reshape", self._ref.get(), _enc(self._name), arr, len(dims))

    def __repr__(self):
        return "<cortado.Blob %s %s>" % (self._name or "param", self.shape)


class Layer:
    """A layer of a net, as pycaffe's net.layers[i]: name, type, blobs (its
    parameters), bottoms and tops (blob names)."""

    def __init__(self, name, type_, blobs, bottoms, tops):
        self.name, self.type, self.blobs, self.bottoms, self.tops = name, type_, blobs, bottoms, tops

    def __repr__(self):
        return "<cortado.Layer %s (%s)>" % (self.name, self.type)


def _names(fn_count, fn_name, h, i):
    L = _L()
    return [_text(getattr(L, fn_name)(h, i, j)) for j in range(getattr(L, fn_count)(h, i))]


class Net:
    """A net from a prototxt, as pycaffe's: Net(model, [weights], phase), or
    with keywords (phase=TEST, weights=None, level=0, stages=(): the state's
    level and stages for include/exclude rules; gpu: a device, -1 the CPU,
    default from set_mode_* and set_device; precision: "fp32", "fp16" or
    "bf16" as trainer --precision, None the file's own types; switches: a
    dict of the trainer's switches over the file's fields, by the flags'
    names, {"share_diffs": False, "channels_last": "all", "cudnn_api":
    "graph"}: README.md, "Switches")."""

    def __init__(self, model, *args, phase=None, weights=None, level=0, stages=(), gpu=None, precision=None,
                 switches=None, _ref=None):
        for a in args:
            if isinstance(a, numbers.Integral):
                phase = a
            else:
                weights = a
        if _ref is None:
            phase = _int(TEST if phase is None else phase, "phase", TRAIN, TEST)
            gpu = _int(_default_gpu() if gpu is None else gpu, "gpu", -1)
            if isinstance(stages, (str, bytes)):
                stages = [stages]
            st = (ctypes.c_char_p * max(1, len(stages)))(*[_enc(x) for x in stages])
            names, values, n = _switches(switches)
            with _lock:
                h = _L().cortado_net_open_switches(_enc(model), phase, _enc(weights), gpu, _enc(precision),
                                                   _int(level, "level", -2 ** 31), st, len(stages), names, values, n)
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
            bottoms = [_names("cortado_net_layer_num_bottoms", "cortado_net_layer_bottom_name", h, i)
                       for i in range(n_layers)]
            tops = [_names("cortado_net_layer_num_tops", "cortado_net_layer_top_name", h, i) for i in range(n_layers)]
        # Blobs refer to the handle, not to the Net: no reference cycle, so a
        # net is freed as soon as nothing uses it.
        self.blobs = collections.OrderedDict((n, Blob(_ref, n)) for n in blob_names)
        self.layers = [Layer(name, t, [Blob(_ref, None, i, j) for j in range(k)], b, tp)
                       for i, (name, t, k, b, tp) in enumerate(zip(self.layer_names, self.layer_types, num_params,
                                                                    bottoms, tops))]
        self.params = collections.OrderedDict((l.name, l.blobs) for l in self.layers if l.blobs)
        self.bottom_names = collections.OrderedDict((l.name, l.bottoms) for l in self.layers)
        self.top_names = collections.OrderedDict((l.name, l.tops) for l in self.layers)
        self._layer_names, self._blob_names = self.layer_names, blob_names
        self.loss = None

    def _layer_index(self, name, what):
        if isinstance(name, numbers.Integral):
            return int(name)
        try:
            return self.layer_names.index(name)
        except ValueError:
            raise Error("%s: net has no layer '%s'" % (what, name)) from None

    def _set_inputs(self, arrays, diff=False):
        for name, value in arrays.items():
            if name not in self.blobs:
                raise Error("'%s' is not a blob of the net" % name)
            v = np.asarray(value, dtype=np.float32)
            if not diff and v.shape != self.blobs[name].shape:
                self.blobs[name].reshape(*v.shape)
            self.blobs[name]._set(int(diff), v)

    def forward(self, blobs=None, start=None, end=None, **inputs):
        """As pycaffe's: sets the given input blobs (reshaping them to the
        arrays; the layers follow), runs forward from layer `start` to layer
        `end` (names; default all), and returns {name: array} for the net's
        outputs (or `end`'s tops) and the blobs named in `blobs`. The arrays
        view the blobs (see the module's notes)."""
        for name in inputs:
            if name not in self.inputs:
                raise Error("'%s' is not an input of the net (inputs: %s)" % (name, ", ".join(self.inputs) or "none"))
        self._set_inputs(inputs)
        loss = ctypes.c_double()
        if start is None and end is None:
            _run(self._ref, "cortado_net_forward", ctypes.byref(loss))
        else:
            lo = 0 if start is None else self._layer_index(start, "forward start")
            hi = len(self.layers) - 1 if end is None else self._layer_index(end, "forward end")
            _run(self._ref, "cortado_net_forward_range", lo, hi, ctypes.byref(loss))
        self.loss = loss.value
        names = list(self.outputs if end is None else self.top_names[self.layer_names[self._layer_index(end, "")]])
        names += [b for b in (blobs or []) if b not in names]
        return collections.OrderedDict((n, self.blobs[n].data) for n in names)

    def backward(self, diffs=None, start=None, end=None, **top_diffs):
        """As pycaffe's: sets the diffs of the given output blobs, runs backward
        (after a forward) from layer `start` down to layer `end` (default
        all), and returns {name: gradient array} for the net's inputs (or
        `end`'s bottoms) and the blobs named in `diffs`."""
        for name in top_diffs:
            if name not in self.outputs:
                raise Error("'%s' is not an output of the net (outputs: %s)" % (name, ", ".join(self.outputs)))
        self._set_inputs(top_diffs, diff=True)
        if start is None and end is None:
            _run(self._ref, "cortado_net_backward")
        else:
            hi = len(self.layers) - 1 if start is None else self._layer_index(start, "backward start")
            lo = 0 if end is None else self._layer_index(end, "backward end")
            _run(self._ref, "cortado_net_backward_range", hi, lo)
        names = list(self.inputs if end is None else self.bottom_names[self.layer_names[self._layer_index(end, "")]])
        names += [d for d in (diffs or []) if d not in names]
        return collections.OrderedDict((n, self.blobs[n].diff) for n in names)

    def _batches(self, arrays):
        """Splits {name: array} into batches of the net's first axis (the last
        one padded with zeros), as pycaffe's _Net_batch; yields (batch, n real)."""
        n = len(next(iter(arrays.values())))
        size = self.blobs[next(iter(arrays))].shape[0]
        for i in range(0, n, size):
            batch = {}
            for name, a in arrays.items():
                a = np.asarray(a, dtype=np.float32)
                if len(a) != n:
                    raise Error("forward_all: '%s' has %d items, not %d" % (name, len(a), n))
                part = a[i:i + size]
                if len(part) < size:
                    pad = np.zeros((size - len(part),) + a.shape[1:], dtype=np.float32)
                    part = np.concatenate([part, pad])
                batch[name] = part
            yield batch, min(size, n - i)

    def forward_all(self, blobs=None, **inputs):
        """As pycaffe's: forward over every item of the input arrays, in batches
        of the net's batch size; returns {output: array of all items}."""
        if not inputs:
            return {k: v.copy() for k, v in self.forward(blobs=blobs).items()}
        all_outs = collections.OrderedDict()
        for batch, real in self._batches(inputs):
            for name, out in self.forward(blobs=blobs, **batch).items():
                all_outs.setdefault(name, []).append(np.array(out[:real], copy=True))
        return collections.OrderedDict((k, np.concatenate(v)) for k, v in all_outs.items())

    def reshape(self):
        _checked("cortado_net_reshape", self._ref.get())

    def copy_from(self, weights):
        """Loads weights by layer name (.caffemodel, or .h5 for HDF5)."""
        _run(self._ref, "cortado_net_copy_weights", _enc(weights))

    def save(self, path):
        """Writes the weights (.h5: HDF5, else a binary .caffemodel)."""
        _run(self._ref, "cortado_net_save", _enc(path))

    def close(self):
        """Frees the net now (a solver's nets go with the solver); arrays
        taken from its blobs must not be used after."""
        self._ref.close()


class Solver:
    """A solver from a solver prototxt (its `type` picks the rule: SGD, Adam, ...);
    precision: "fp32", "fp16" or "bf16" as trainer --precision (its nets and
    the solver), None the files' own types; switches: as for Net, over the
    fields of its nets and the solver ({"cuda_graphs": False})."""

    _rule = None  # the pycaffe class's rule (AdamSolver: "Adam"); None: any

    def __init__(self, solver_file, gpu=None, precision=None, switches=None):
        if self._rule is not None:
            _check_rule(solver_file, self._rule, type(self).__name__)
        gpu = _int(_default_gpu() if gpu is None else gpu, "gpu", -1)
        names, values, n = _switches(switches)
        with _lock:
            h = _L().cortado_solver_open_switches(_enc(solver_file), gpu, _enc(precision), names, values, n)
            if not h:
                raise _error()
            self._ref = _Ref(h, "cortado_solver_close", "solver")
            net = _L().cortado_solver_net(h)
            tests = [_L().cortado_solver_test_net(h, i) for i in range(_L().cortado_solver_num_test_nets(h))]
        self.net = Net(None, _ref=_Ref(net, "cortado_net_close", "net", self._ref))
        self.test_nets = [Net(None, _ref=_Ref(t, "cortado_net_close", "net", self._ref)) for t in tests]

    def step(self, iters):
        _run(self._ref, "cortado_solver_step", _int(iters, "iters", 0))

    def solve(self, resume=None):
        _run(self._ref, "cortado_solver_solve", _enc(resume))

    def restore(self, state):
        _run(self._ref, "cortado_solver_restore", _enc(state))

    def snapshot(self):
        _run(self._ref, "cortado_solver_snapshot")

    @property
    def iter(self):
        return _call("cortado_solver_iter", self._ref.get())

    def close(self):
        """Frees the solver and its nets now; arrays taken from their blobs
        must not be used after."""
        self._ref.close()


_RULES = {"SGD": 0, "Nesterov": 1, "AdaGrad": 2, "RMSProp": 3, "AdaDelta": 4, "Adam": 5}


def _check_rule(solver_file, rule, cls):
    """pycaffe's AdamSolver(file) runs Adam whatever the file says; here the
    file's type picks the rule, so a class that names another is an error."""
    from . import _prototxt
    try:
        with open(solver_file) as f:
            p = _prototxt.parse(f.read())
    except (OSError, _prototxt.ParseError):
        return  # the library reports it, with the file and line
    named = p.get("type", [None])[-1]
    if named is None and "solver_type" in p:
        legacy = p["solver_type"][-1]
        named = {v: k for k, v in _RULES.items()}.get(legacy, legacy) if isinstance(legacy, int) else \
            {"SGD": "SGD", "NESTEROV": "Nesterov", "ADAGRAD": "AdaGrad", "RMSPROP": "RMSProp",
             "ADADELTA": "AdaDelta", "ADAM": "Adam"}.get(legacy, legacy)
    named = named or "SGD"
    if named != rule:
        raise Error("%s: %s runs %s, but the file names type \"%s\" (use cortado.get_solver or Solver, which "
                    "follow the file, or change its type)" % (solver_file, cls, rule, named))


def _rule_class(rule):
    return type(rule + "Solver", (Solver,), {"_rule": rule, "__doc__": "pycaffe's %sSolver: a Solver whose file "
                                             "names type \"%s\" (or none, for SGD)." % (rule, rule)})


SGDSolver = _rule_class("SGD")
NesterovSolver = _rule_class("Nesterov")
AdaGradSolver = _rule_class("AdaGrad")
RMSPropSolver = _rule_class("RMSProp")
AdaDeltaSolver = _rule_class("AdaDelta")
AdamSolver = _rule_class("Adam")


def get_solver(solver_file, precision=None, switches=None):
    return Solver(solver_file, precision=precision, switches=switches)


# pycaffe's other modules: caffe.io (Transformer, load_image, resize_image,
# oversample), caffe.Classifier, caffe.draw (draw_net_to_file, needs pydot).
from . import io  # noqa: E402
from .classifier import Classifier  # noqa: E402


def draw_net(net, rankdir="LR", ext="png", phase=None, display_lrm=False):
    """The picture of a net (a prototxt path or text), as bytes in format
    `ext`, as pycaffe's caffe.draw.draw_net; needs pydot and graphviz."""
    from . import draw
    return draw.draw_net(net, rankdir, ext, phase, display_lrm)


def draw_net_to_file(net, filename, rankdir="LR", phase=None, display_lrm=False):
    """Writes the picture of a net (a prototxt path or text) to `filename`,
    in the format its extension names; needs pydot and graphviz."""
    from . import draw
    return draw.draw_net_to_file(net, filename, rankdir, phase, display_lrm)
