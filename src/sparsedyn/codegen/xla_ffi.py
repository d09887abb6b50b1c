"""A handler of XLA's foreign-function interface (FFI) that runs a compiled kernel.

One generic C++ handler, ``sd_xla_call``, compiled once per machine against the XLA FFI headers
that JAX ships (``jax.ffi.include_dir()``) and cached in the build cache.  It knows no model and
no kernel: the attributes of each call say which compiled entry points to call (their addresses
in a library built by :mod:`.runtime`), the size of one state of every argument, and what to check.

Per call (``n`` buffers, inputs first, all float64):

* the number of states ``N`` is each buffer's element count over its one-state size (all must
  agree: the caller broadcasts batch axes, as ``vmap_method="broadcast_all"`` does);
* every input is checked finite and every quaternion of a configuration input of unit norm
  (``| |quat|^2 - 1 | <= tol``, as :func:`sparsedyn._checks.configuration`); a failure returns an
  FFI error naming the kernel, the argument, the state and the joint;
* ``N = 1`` calls the single-state entry ``sd_K``; a batch of at least two vector widths calls
  the vectorised batch entry ``sd_K_batch`` (lanes across states, OpenMP threads), a shorter one
  the loop entry ``sd_K_loop``; the thread count follows the kernel's flop count as
  :meth:`.runtime.KernelSet._threads_for` chooses it.

:func:`load_handler` returns the loaded library (its symbol ``sd_xla_call`` is the handler), or
``None`` with the reason when no C++ compiler or no headers are available.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import threading
from pathlib import Path

__all__ = ["load_handler", "cxx_command", "MAX_BUFFERS"]

#: Most buffers (inputs and outputs together) one kernel call passes.
MAX_BUFFERS = 24


def _dispatch_source() -> str:
    """The three calls of a compiled entry point of ``n`` pointer arguments, ``n = 1..MAX_BUFFERS``
    (the C ABI passes pointers alike, so one cast per arity calls any kernel)."""
    out = ["typedef double *P;"]
    for kind, ret, pre, post in (("single", "void", "", ""), ("loop", "void", "long, ", ", int"),
                                 ("batch", "int", "long, ", ", int, int")):
        args = "long N, int t, " if kind != "single" else ""
        out.append(f"static {ret} call_{kind}(std::intptr_t f, {args}int n, P *p) {{")
        out.append("  switch (n) {")
        for n in range(1, MAX_BUFFERS + 1):
            ps = ", ".join(["P"] * n)
            xs = ", ".join(f"p[{k}]" for k in range(n))
            call = {"single": f"(({ret} (*)({ps}))f)({xs})",
                    "loop": f"(({ret} (*)(long, {ps}, int))f)(N, {xs}, t)",
                    "batch": f"(({ret} (*)(long, {ps}, int, int))f)(N, {xs}, t, 0)"}[kind]
            out.append(f"    case {n}: {'return ' if ret == 'int' else ''}{call};{' break;' if ret == 'void' else ''}")
        out.append("  }")
        out.append("  return 0;" if ret == "int" else "")
        out.append("}")
    return "\n".join(out)


SOURCE = r"""
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

DISPATCH

static std::string item(std::string_view list, size_t k) {
  size_t start = 0;
  for (size_t j = 0; j < k; j++) {
    start = list.find('\n', start);
    if (start == std::string_view::npos) return "?";
    start++;
  }
  size_t stop = list.find('\n', start);
  return std::string(list.substr(start, stop == std::string_view::npos ? std::string_view::npos : stop - start));
}

static ffi::Error bad(std::string_view kernel, const std::string &what) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, std::string(kernel) + ": " + what);
}

static ffi::Error SdCall(ffi::RemainingArgs args, ffi::RemainingRets rets, int64_t f_single, int64_t f_loop,
                         int64_t f_batch, int64_t lanes, ffi::Span<const int64_t> sizes, int64_t flops,
                         int64_t max_threads, ffi::Span<const int64_t> qins, ffi::Span<const int64_t> quats,
                         double tol, std::string_view kernel, std::string_view names, std::string_view joints) {
  const size_t nin = args.size(), nout = rets.size(), n = nin + nout;
  if (n < 1 || n > MAXBUF || sizes.size() != n)
    return bad(kernel, "the compiled call got " + std::to_string(n) + " buffers for " +
                       std::to_string(sizes.size()) + " arguments");
  P p[MAXBUF];
  long N = -1;
  for (size_t i = 0; i < n; i++) {
    size_t count;
    ffi::DataType type;
    if (i < nin) {
      auto b = args.get<ffi::AnyBuffer>(i);
      if (!b.has_value()) return b.error();
      p[i] = static_cast<P>(b->untyped_data());
      count = b->element_count();
      type = b->element_type();
    } else {
      auto b = rets.get<ffi::AnyBuffer>(i - nin);
      if (!b.has_value()) return b.error();
      p[i] = static_cast<P>((*b)->untyped_data());
      count = (*b)->element_count();
      type = (*b)->element_type();
    }
    if (type != ffi::DataType::F64) return bad(kernel, item(names, i) + ": the compiled kernel takes float64 arrays");
    if (sizes[i] > 0) {
      long m = (long)(count / (size_t)sizes[i]);
      if ((size_t)m * (size_t)sizes[i] != count || (N >= 0 && m != N))
        return bad(kernel, item(names, i) + ": " + std::to_string(count) + " elements are not whole states of " +
                           std::to_string(sizes[i]) + " like the other arguments");
      N = m;
    }
  }
  if (N <= 0) return ffi::Error::Success();
  for (size_t i = 0; i < nin; i++) {
    const long m = N * sizes[i];
    for (long k = 0; k < m; k++)
      if (!std::isfinite(p[i][k]))
        return bad(kernel, item(names, i) + ": contains NaN or infinite values (state " + std::to_string(k / sizes[i]) +
                           ", element " + std::to_string(k % sizes[i]) + ")");
  }
  for (size_t g = 0; g < qins.size(); g++) {
    const int64_t i = qins[g];
    if (i < 0 || (size_t)i >= nin) continue;
    for (long s = 0; s < N; s++)
      for (size_t j = 0; j < quats.size(); j++) {
        const double *x = p[i] + s * sizes[i] + quats[j];
        const double e = std::fabs(x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3] - 1.0);
        if (!(e <= tol))
          return bad(kernel, item(names, i) + ": the quaternion of joint '" + item(joints, j) + "' (" + item(names, i) +
                             "[" + std::to_string(quats[j]) + ":" + std::to_string(quats[j] + 4) + "], [x, y, z, w]) of state " +
                             std::to_string(s) + " is not of unit norm; normalise it with sparsedyn.normalize");
      }
  }
  if (N == 1) {
    call_single(f_single, (int)n, p);
    return ffi::Error::Success();
  }
  double want = (double)N * (double)flops / 1e10 / 0.005;
  int t = want < 1.0 ? 1 : (want > (double)max_threads ? (int)max_threads : (int)want);
  if (t < 1) t = 1;
  if (f_batch != 0 && N >= 2 * lanes) {
    if (!call_batch(f_batch, N, t, (int)n, p))
      return ffi::Error(ffi::ErrorCode::kResourceExhausted, std::string(kernel) + ": the batched kernel could not "
                        "allocate its work space");
  } else {
    call_loop(f_loop, N, t, (int)n, p);
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(sd_xla_call, SdCall,
                              ffi::Ffi::Bind()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<int64_t>("f_single")
                                  .Attr<int64_t>("f_loop")
                                  .Attr<int64_t>("f_batch")
                                  .Attr<int64_t>("lanes")
                                  .Attr<ffi::Span<const int64_t>>("sizes")
                                  .Attr<int64_t>("flops")
                                  .Attr<int64_t>("max_threads")
                                  .Attr<ffi::Span<const int64_t>>("qins")
                                  .Attr<ffi::Span<const int64_t>>("quats")
                                  .Attr<double>("tol")
                                  .Attr<std::string_view>("kernel")
                                  .Attr<std::string_view>("names")
                                  .Attr<std::string_view>("joints"));
""".replace("DISPATCH", _dispatch_source()).replace("MAXBUF", str(MAX_BUFFERS))

_lock = threading.Lock()
_loaded: dict = {}


def cxx_command(compiler):
    """The C++ compiler beside C compiler ``compiler`` (``$SPARSEDYN_CXX``, ``$CXX``, else ``g++`` for
    ``gcc``, ``clang++`` for ``clang``, ``c++``), as an argv list, or ``None``."""
    for env in ("SPARSEDYN_CXX", "CXX"):
        if os.environ.get(env):
            return os.environ[env].split()
    names = []
    if compiler is not None:
        base = os.path.basename(compiler.argv[0])
        for c, cxx in (("clang", "clang++"), ("gcc", "g++"), ("cc", "c++")):
            if c in base:
                names.append(os.path.join(os.path.dirname(compiler.argv[0]), base.replace(c, cxx)))
                break
    names += ["c++", "g++", "clang++"]
    for name in names:
        path = shutil.which(name)
        if path:
            return [path]
    return None


def load_handler(compiler, include_dir):
    """``(ctypes library, None)`` holding ``sd_xla_call`` (built once per machine and headers into the
    build cache), or ``(None, reason)`` when it cannot be built (no C++ compiler, no FFI headers)."""
    from . import build

    header = Path(include_dir, "xla", "ffi", "api", "ffi.h")
    if not header.is_file():
        return None, f"the XLA FFI headers are missing ({header})"
    cxx = cxx_command(compiler)
    if cxx is None:
        return None, "no C++ compiler (set SPARSEDYN_CXX or CXX)"
    ident = "\n".join([SOURCE, " ".join(cxx), str(include_dir),
                       hashlib.sha256(header.read_bytes()).hexdigest()])
    key = hashlib.sha256(ident.encode()).hexdigest()[:32]
    with _lock:
        if key in _loaded:
            return _loaded[key]
        try:
            path = build.sealed_file(f"sd_xla_ffi_{key[:16]}", ".so",
                                     lambda path, side, d: _build(cxx, include_dir, path, side, d))
            result = ctypes.CDLL(str(path)), None
        except (OSError, build.BuildError) as e:
            result = None, f"the FFI handler did not build: {e}"
        _loaded[key] = result
        return result


def _build(cxx, include_dir, path, side, d):
    import subprocess
    import sys
    import tempfile

    from . import build

    # Seconds of C++: said as plain calls say their builds (once per machine and JAX version).
    sys.stdout.flush()
    print(f"sparsedyn: building the XLA FFI handler for JAX (once per JAX version); cached in {d}", file=sys.stderr,
          flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=d))
    try:
        (tmp / "sd_xla_ffi.cc").write_text(SOURCE)
        cmd = cxx + ["-std=c++17", "-O2", "-fPIC", "-shared", f"-I{include_dir}", "-o", "mod.so", "sd_xla_ffi.cc"]
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if r.returncode != 0:
            raise build.BuildError(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
        build._seal(tmp / "mod.so", tmp / "mod.sha256", path)
        os.replace(tmp / "mod.so", path)
        os.replace(tmp / "mod.sha256", side)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
