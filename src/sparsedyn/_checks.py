"""Argument checking shared by the public numerical functions."""

from __future__ import annotations

import math
import os
import sys

import numpy as np

from . import backend as bk

QUAT_TOL = 1e-5


def user_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning its caller issues
    (``warnings.warn(..., stacklevel=user_stacklevel())``) to the first frame outside the package:
    the user's line, however deep in the library the warning arose.  Frames are the package's by
    their module's ``__name__`` (so the generated wrappers of kernels count as the package's)."""
    f, level = sys._getframe(1), 1
    while f.f_back is not None and f.f_globals.get("__name__", "").partition(".")[0] == "sparsedyn":
        f, level = f.f_back, level + 1
    return level


def model_first(name, model, params):
    """``TypeError`` when ``model`` (the first argument of the public function ``name``, whose leading
    parameters are ``params``) is an array, a number, a string, a sequence or ``None``: the model comes
    first (``sd.f(q, model, ...)`` is the mistake this names, as the registered kernels do)."""
    if model is None or isinstance(model, (np.ndarray, np.generic, int, float, complex, str, bytes, list, tuple)):
        call = f"{name}({params}, ...)" if "," in params else f"{name}({params})"
        raise TypeError(f"{name}: the model comes first, {call}; got {type(model).__name__} as the first argument")


def numeric(name, x, expected):
    """``x`` as a float64 array, or an object array of traced symbols (left as it is).

    The one place where every public numerical function (and the compiled kernels' NumPy side)
    converts its array arguments, so that both paths compute in float64 and check the same values:
    integer, float16/32 and longdouble input becomes float64; ``np.matrix`` becomes a plain array;
    object arrays stay object arrays (the backend that the tracer uses; :func:`values` gives the
    numbers of those that hold plain numbers, which are checked like float input); complex, boolean,
    string and other input is refused with a ``TypeError`` naming the argument.  ``expected``
    describes the shape for the message.
    """
    if x is None:
        raise TypeError(f"{name}: expected an array of shape {expected}, got None")
    if isinstance(x, np.matrix):
        x = np.asarray(x)
    if bk.is_symbolic(x):
        bad = next((e for e in x.flat if isinstance(e, _NOT_REAL)), None)
        if bad is not None:
            raise TypeError(f"{name}: expected a numeric array of real numbers, shape {expected}; the object "
                            f"array holds {type(bad).__name__} values")
        return x
    if not isinstance(x, np.ndarray):
        try:
            bk.refuse_foreign(x)                  # JAX tracers, CasADi symbols: name the bridge that works
        except TypeError as e:
            raise TypeError(f"{name}: {e}") from None
        except ValueError:                        # NumPy cannot make an array of it: said below
            pass
        try:
            x = np.asarray(x)
        except ValueError as e:
            if "inhomogeneous" in str(e) or "sequence" in str(e):
                raise ValueError(f"{name}: expected a numeric array of shape {expected}; got a ragged nested "
                                 f"sequence (rows of different lengths, or a number among lists)") from None
            raise TypeError(f"{name}: expected a numeric array of shape {expected}; {e}") from None
        except TypeError as e:
            raise TypeError(f"{name}: expected a numeric array of shape {expected}; {e}") from None
        if x.dtype == object:                     # ragged lists, or Python objects
            return numeric(name, x, expected) if x.ndim else _refuse(name, x, expected)
    kind = x.dtype.kind
    if kind == "f":
        return x if x.dtype == np.float64 else x.astype(np.float64)
    if kind in "iu":
        return x.astype(np.float64)
    return _refuse(name, x, expected)


_NOT_REAL = (complex, np.complexfloating, bool, np.bool_, str, bytes)
_REAL = (int, float, np.integer, np.floating)


def values(x):
    """The numbers of a checked array as float64 for value checks: ``x`` itself for float input, a
    float copy of an object array of plain numbers, None for an object array of traced symbols."""
    if not bk.is_symbolic(x):
        return x
    if all(isinstance(e, _REAL) for e in x.flat):
        return x.astype(np.float64)
    return None


def _refuse(name, x, expected):
    what = {"c": "complex", "b": "boolean", "U": "string", "S": "bytes", "M": "datetime", "m": "timedelta",
            "O": "Python object", "V": "structured"}.get(x.dtype.kind, str(x.dtype))
    raise TypeError(f"{name}: expected a numeric array of real numbers, shape {expected}; got a {what} "
                    f"array (dtype {x.dtype})")


def vector(model, name, x, size, what, check_values=True):
    """``x`` as an array (..., size); the error names the argument and the size expected.
    ``check_values``: also refuse NaN and infinite values."""
    x = numeric(name, x, f"(..., {size}) ({what})")
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"{name}: expected shape (..., {size}) ({what} of model {model.name!r}), "
                         f"got shape {x.shape}")
    if check_values and x.ndim == 1 and x.dtype == np.float64 and math.isfinite(sum(x.tolist())):
        return x                                  # (one state: a finite sum has finite terms; Python's sum is the cheaper)
    xv = values(x) if check_values else None
    if xv is not None and not np.isfinite(xv).all():
        raise ValueError(f"{name}: contains NaN or infinite values{first_bad(~np.all(np.isfinite(xv), -1))}")
    return x


def first_bad(bad):
    """``" at batch index (i, ...) (the first)"`` for a boolean array ``bad`` of the batch shape, or
    ``""`` for one state: where a batched input first fails a check."""
    bad = np.asarray(bad)
    if bad.ndim == 0 or not bad.any():
        return ""
    return f" at batch index {tuple(int(i) for i in np.unravel_index(np.argmax(bad), bad.shape))} (the first)"


def quaternion_blocks(model):
    """``(joint indices, index array (k, 4) into q)`` of the quaternions of ``model``'s joints
    (:meth:`~sparsedyn.Joint.quaternions`: spherical and free joints, composite joints with such parts),
    from the model's :class:`~sparsedyn.model.topology.Topology`."""
    return model.topology.quaternions



def configuration(model, q, name="q", check_values=True, unit=True):
    """Checked configuration; quaternion blocks must be unit quaternions (float input).
    ``check_values=False``: conversion and shape only (a compiled batch checks the values itself);
    ``unit=False``: quaternions of any norm but zero (what :func:`~sparsedyn.normalize` takes)."""
    q = vector(model, name, q, model.nq, "nq joint coordinates", check_values)
    if check_values and unit and q.ndim == 1 and q.dtype == np.float64:
        t = q.tolist()                            # (one state: Python's floats, cheaper than NumPy's calls on a few)
        if all(abs(t[a] * t[a] + t[a + 1] * t[a + 1] + t[a + 2] * t[a + 2] + t[a + 3] * t[a + 3] - 1.0) <= QUAT_TOL
               for a in quaternion_blocks(model)[1][:, 0].tolist()):
            return q
    qv = values(q) if check_values else None
    if qv is not None:
        joints, idx = quaternion_blocks(model)
        if joints and not unit:
            norm2 = np.sum(qv[..., idx] ** 2, -1)                      # (..., k)
            if not np.all(norm2 > 1e-200):
                k = int(np.argmin(np.min(norm2.reshape(-1, len(joints)), 0)))
                raise ValueError(f"{name}: the quaternion of joint {model.joint_names[joints[k]]!r} is zero"
                                 f"{first_bad(~np.all(norm2 > 1e-200, -1))}; it has no direction to normalise to")
        elif joints:
            quat = qv[..., idx]                                        # (..., k, 4)
            err = np.abs(np.sum(quat * quat, -1) - 1.0)
            if not np.all(err <= QUAT_TOL):
                k = int(np.argmax(np.max(err.reshape(-1, len(joints)), 0)))
                i, stop = joints[k], int(idx[k, -1]) + 1
                raise ValueError(f"{name}: the quaternion of joint {model.joint_names[i]!r} "
                                 f"(q[{stop - 4}:{stop}], [x, y, z, w]) is not of unit norm "
                                 f"(| |q|^2 - 1 | up to {err.max():.3g}){first_bad(~np.all(err <= QUAT_TOL, -1))}; "
                                 f"normalise it with sparsedyn.normalize(model, {name.rsplit(': ', 1)[-1]})")
    return q


def velocity(model, v, name="v"):
    return vector(model, name, v, model.nv, "nv joint velocities")


def body_forces(model, f, name="f_ext", check_values=True):
    """External forces per body (..., NB, 6); ``check_values``: also refuse NaN and infinite values."""
    f = numeric(name, f, f"(..., {model.nbodies}, 6)")
    if f.ndim < 2 or f.shape[-2:] != (model.nbodies, 6):
        raise ValueError(f"{name}: expected shape (..., {model.nbodies}, 6) (one spatial force [n; f] per body "
                         f"of model {model.name!r}, body frame), got shape {f.shape}")
    fv = values(f) if check_values else None
    if fv is not None and not np.all(np.isfinite(fv)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return f


def batch_shape(**arrays):
    """Common leading batch shape of the named arrays (all but their trailing core axes)."""
    shapes = {}
    for name, (x, core) in arrays.items():
        if x is not None:
            shapes[name] = x.shape[:x.ndim - core]
    try:
        return np.broadcast_shapes(*shapes.values()) if shapes else ()
    except ValueError:
        desc = ", ".join(f"{n}: {s}" for n, s in shapes.items())
        raise ValueError(f"batch shapes do not broadcast ({desc})") from None


def gravity(model, g):
    if g is None:
        return model.gravity
    g = numeric("gravity", g, "(..., 3)")
    if g.shape[-1:] != (3,):
        raise ValueError(f"gravity: expected shape (..., 3), got {g.shape}")
    gv = values(g)
    if gv is not None and not np.all(np.isfinite(gv)):
        raise ValueError("gravity: contains NaN or infinite values")
    return g


def _plain(x, n):
    """``x`` a float64 ndarray (..., n): the fast path of :func:`dynamics` may take it as it is."""
    return type(x) is np.ndarray and x.dtype == np.float64 and x.ndim >= 1 and x.shape[-1] == n


def _plain_values_ok(model, q, v, u):
    """Whether plain float arrays pass :func:`dynamics`' value checks (finite values, unit quaternions),
    in a few NumPy calls; ``False`` sends them through the full checks, which name what is wrong (a
    sum that overflows only costs the full checks)."""
    if q.ndim == 1:                 # one state: |x|^2, finite only if every entry is (an overflow
        # only costs the full checks)
        if not math.isfinite(_dot(q, q) + _dot(v, v) + _dot(u, u)):
            return False
    elif not math.isfinite(_add(q, None) + _add(v, None) + _add(u, None)):
        return False
    _, idx = quaternion_blocks(model)
    if not len(idx):
        return True
    if q.ndim == 1 and len(idx) == 1:
        quat = q.take(idx[0])
        return bool(abs(_dot(quat, quat) - 1.0) <= QUAT_TOL)
    quat = q.take(idx.reshape(-1), -1)
    norms = (quat * quat) @ model.topology.quaternion_sums          # |quat|^2 per block: one product
    norms -= 1.0
    return bool(np.abs(norms, out=norms).max(initial=0.0) <= QUAT_TOL)      # no state: nothing to refuse


_add = np.add.reduce
_dot = np.dot


def dynamics(model, q, v, u, f_ext, g, u_name, u_what):
    """Checked arguments of a dynamics function ``f(model, q, v, u, f_ext, gravity)``.

    Returns ``(q, v, u, f_ext, g, batch shape, symbolic)``; ``symbolic`` is true
    when any input is an object array (then no value-dependent checks may run).
    """
    if f_ext is None and g is None and _plain(q, model.nq) and _plain(v, model.nv) and _plain(u, model.nv) \
            and q.shape[:-1] == v.shape[:-1] == u.shape[:-1] and _plain_values_ok(model, q, v, u):
        return q, v, u, None, model.gravity, q.shape[:-1], False      # the checks below would all pass
    q = configuration(model, q)
    v = velocity(model, v, "v")
    u = vector(model, u_name, u, model.nv, u_what)
    if f_ext is not None:
        f_ext = body_forces(model, f_ext)
    g = gravity(model, g)
    shape = batch_shape(q=(q, 1), v=(v, 1), **{u_name: (u, 1)}, f_ext=(f_ext, 2), gravity=(g, 1))
    symbolic = any(bk.is_symbolic(x) for x in (q, v, u, f_ext, g) if x is not None)
    return q, v, u, f_ext, g, shape, symbolic


class NonFiniteResultError(FloatingPointError, ValueError):
    """A function computed NaN or infinite values from finite inputs: they overflow double precision
    (a velocity of 1e200 squared in the bias forces ...).  Raised instead of handing NaN back."""


def controlled(who, controller, dt, nv):
    """``tau_at(k, q, v)``: the joint forces ``controller(k dt, q, v)`` returns, refused naming the
    controller and the step where they are not finite numbers of the state's shape (..., nv)."""
    def tau_at(k, q, v):
        tau = controller(k * dt, q, v)
        try:
            got = None if tau is None or isinstance(tau, (str, bytes)) else np.asarray(tau, float)
        except (TypeError, ValueError):
            got = None
        if got is None or got.shape[-1:] != (nv,) or not np.isfinite(got).all():
            what = f"shape {got.shape}" + ("" if got.shape[-1:] != (nv,) else ", not finite") if got is not None \
                else type(tau).__name__
            raise ValueError(f"{who}: the controller returned {what} at step {k} (t = {k * dt:g} s); it must return "
                             f"finite joint forces of shape (nv,) = ({nv},), or (B, nv) for a batch")
        return tau
    return tau_at


def finite_result(name, result, core_ndims):
    """``result`` (an array or a tuple of arrays) unchanged when every value is finite; else
    :class:`NonFiniteResultError` naming the function ``name``, the output and the first state of a
    batch (``core_ndims``: per output, the number of trailing axes of one state).  Object arrays
    (traced symbols) and non-arrays pass."""
    outs = result if isinstance(result, tuple) else (result,)
    for j, x in enumerate(outs):
        if type(x) is not np.ndarray or x.dtype.kind != "f" or not x.size:
            continue
        ok = np.isfinite(x)
        if ok.all():
            continue
        core = core_ndims[j] if j < len(core_ndims) else 0
        bad = ~ok.reshape(ok.shape[:ok.ndim - core] + (-1,)).all(-1) if core <= ok.ndim else ~ok
        fields = getattr(result, "_fields", None)
        what = f" (output {fields[j]!r})" if fields else f" (output {j})" if len(outs) > 1 else ""
        raise NonFiniteResultError(
            f"{name}: the result{what} is not finite for finite inputs{first_bad(bad)}: the inputs are too large "
            f"for double precision (a product or square of them overflows); scale them to physical magnitudes")
    return result


#: The types of a list's numbers that :func:`flat_floats` converts (Python's, and NumPy's that ``list(q)``
#: of an array gives).
_FLAT = frozenset((float, int, np.float64, np.float32, np.int64, np.int32))


def flat_reals(x) -> bool:
    """Whether ``x`` is a flat list or tuple of real numbers (:data:`_FLAT`): one state as plain numbers."""
    return type(x) in (list, tuple) and _FLAT.issuperset(map(type, x))


def flat_floats(*xs):
    """``xs`` with each flat list or tuple of real numbers (:func:`flat_reals`) made a float64 array (the
    native roads take one state's float64 arrays as given); anything else as it is (the roads' checks name
    what is wrong with it)."""
    return tuple(np.array(x, float) if flat_reals(x) else x for x in xs)


def plain_floats(who, name, x, expected):
    """``x`` as a float64 array for a function that runs on numbers only (a time step, a rollout):
    :func:`numeric`'s conversions and errors (ragged lists, complex ...), and an object array of plain
    numbers converted; traced symbols are refused with a ``TypeError`` naming ``who`` and ``name``."""
    x = numeric(f"{who}: {name}", x, expected)
    if x.dtype == object:
        xv = values(x)
        if xv is None:
            raise TypeError(f"{who}: {name}: expected numbers, shape {expected}; got an object array of traced "
                            f"symbols (trace the kernels this function runs instead)")
        x = xv
    return x


class BatchMemoryError(MemoryError, ValueError):
    """A call whose batch needs more memory than the machine has (a broadcast view of 1e9 states):
    refused before anything is allocated, naming the function and the size."""


def batch_memory(name, states, doubles_per_state):
    """Raise :class:`BatchMemoryError` when ``states`` states of ``doubles_per_state`` float64 results
    each need more bytes than the machine's physical memory (nothing checked where it is unknown)."""
    need = int(states) * int(doubles_per_state) * 8
    try:
        have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):    # pragma: no cover - not a POSIX system
        return
    if need > have > 0:
        raise BatchMemoryError(f"{name}: a batch of {int(states)} states needs {need / 2 ** 30:.1f} GiB for its "
                               f"results alone, more than this machine's {have / 2 ** 30:.1f} GiB of memory; "
                               f"split it into smaller batches")
