"""A handler of XLA's foreign-function interface (FFI) that runs a compiled kernel.

One generic handler, ``sd_xla_call``, written in C against XLA's C API (``xla/ffi/api/c_api.h``,
among the headers JAX ships: ``jax.ffi.include_dir()``), built by the C compiler that builds the
kernels (the pip compiler too) in a fraction of a second, and cached in the build cache.  It knows
no model and no kernel: the attributes of each call say which compiled entry points to call (their
addresses in a library built by :mod:`.runtime`), the size of one state of every argument, and
what to check.

Per call (``n`` buffers, inputs first, all float64):

* the number of states ``N`` is each buffer's element count over its one-state size (all must
  agree: the caller broadcasts batch axes, as ``vmap_method="broadcast_all"`` does);
* every input is checked finite and every quaternion of a configuration input of unit norm
  (``| |quat|^2 - 1 | <= tol``, as :func:`sparsedyn._checks.configuration`); a failure returns an
  FFI error naming the kernel, the argument, the state and the joint;
* ``N = 1`` calls the single-state entry ``sd_K``; a batch of at least two vector widths calls
  the vectorised batch entry ``sd_K_batch`` (lanes across states, OpenMP threads), a shorter one
  the loop entry ``sd_K_loop``; the thread count follows the kernel's flop count as
  :meth:`.runtime.KernelSet._threads_for` chooses it.  Kernels built without OpenMP (attribute
  ``split``: the pip compiler has none) get their states split over POSIX threads by the handler,
  contiguous chunks starting at multiples of the vector width, each entry called on one thread.

The handler answers XLA's metadata query (the FFI version of the headers it was built against)
as the C++ binding of ``xla/ffi/api/ffi.h`` does.  :func:`load_handler` returns the loaded library
(its symbol ``sd_xla_call`` is the handler), or ``None`` with the reason when no C compiler or no
headers are available.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from pathlib import Path

__all__ = ["load_handler", "MAX_BUFFERS"]

#: Most buffers (inputs and outputs together) one kernel call passes.
MAX_BUFFERS = 24


def _dispatch_source() -> str:
    """The three calls of a compiled entry point of ``n`` pointer arguments, ``n = 1..MAX_BUFFERS``
    (the C ABI passes pointers alike, so one cast per arity calls any kernel)."""
    out = ["typedef double *P;"]
    for kind, ret, pre, post in (("single", "void", "", ""), ("loop", "void", "long, ", ", int"),
                                 ("batch", "int", "long, ", ", int, int")):
        args = "long N, int t, " if kind != "single" else ""
        out.append(f"static {ret} call_{kind}(intptr_t f, {args}int n, P *p) {{")
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
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "xla/ffi/api/c_api.h"

DISPATCH

typedef XLA_FFI_CallFrame Frame;

/* A chunk of states for one thread: the batch entry (kind 1) or the loop entry (kind 0). */
typedef struct { int kind, nb, ret; intptr_t f; long n; P p[MAXBUF]; } Job;

static void *run_job(void *arg) {
  Job *j = (Job *)arg;
  if (j->kind) j->ret = call_batch(j->f, j->n, 1, j->nb, j->p);
  else { call_loop(j->f, j->n, 1, j->nb, j->p); j->ret = 1; }
  return NULL;
}

/* N states in t contiguous chunks (starting at multiples of step) on t threads, this one included;
   0 when a chunk's batch entry could not allocate its work space. */
static int in_threads(int kind, intptr_t f, long N, int t, int nb, P *p, const int64_t *sizes, long step) {
  enum { MAXT = 64 };
  Job jobs[MAXT];
  pthread_t th[MAXT];
  int started[MAXT] = {0}, k = 0, ok = 1;
  if (t > MAXT) t = MAXT;
  long per = (N + t - 1) / t;
  per = (per + step - 1) / step * step;
  for (long s = 0; s < N && k < t; s += per, k++) {
    jobs[k].kind = kind; jobs[k].f = f; jobs[k].nb = nb; jobs[k].ret = 0;
    jobs[k].n = N - s < per ? N - s : per;
    for (int i = 0; i < nb; i++) jobs[k].p[i] = p[i] + s * (sizes[i] > 0 ? sizes[i] : 0);
  }
  for (int i = 1; i < k; i++) started[i] = pthread_create(&th[i], NULL, run_job, &jobs[i]) == 0;
  run_job(&jobs[0]);
  for (int i = 1; i < k; i++) {
    if (started[i]) pthread_join(th[i], NULL);
    else run_job(&jobs[i]);                 /* no thread to be had: this one runs the chunk */
  }
  for (int i = 0; i < k; i++) ok &= jobs[i].ret != 0;
  return ok;
}

/* The attribute ``name`` of type ``type`` (NULL when missing). */
static const void *attr(const Frame *cf, const char *name, XLA_FFI_AttrType type) {
  const size_t n = strlen(name);
  for (int64_t i = 0; i < cf->attrs.size; i++) {
    const XLA_FFI_ByteSpan *s = cf->attrs.names[i];
    if (s->len == n && memcmp(s->ptr, name, n) == 0 && cf->attrs.types[i] == type) return cf->attrs.attrs[i];
  }
  return NULL;
}

static int scalar(const Frame *cf, const char *name, XLA_FFI_DataType dtype, void *out, size_t size) {
  const XLA_FFI_Scalar *a = (const XLA_FFI_Scalar *)attr(cf, name, XLA_FFI_AttrType_SCALAR);
  if (!a || a->dtype != dtype) return 0;
  memcpy(out, a->value, size);
  return 1;
}

static const XLA_FFI_Array *array(const Frame *cf, const char *name) {
  const XLA_FFI_Array *a = (const XLA_FFI_Array *)attr(cf, name, XLA_FFI_AttrType_ARRAY);
  return a && a->dtype == XLA_FFI_DataType_S64 ? a : NULL;
}

static XLA_FFI_ByteSpan string(const Frame *cf, const char *name) {
  const XLA_FFI_ByteSpan *a = (const XLA_FFI_ByteSpan *)attr(cf, name, XLA_FFI_AttrType_STRING);
  XLA_FFI_ByteSpan none = {"?", 1};
  return a ? *a : none;
}

/* Line ``k`` of ``list`` into ``buf``. */
static const char *item(XLA_FFI_ByteSpan list, size_t k, char *buf, size_t cap) {
  size_t start = 0;
  for (size_t j = 0; j < k; j++) {
    while (start < list.len && list.ptr[start] != '\n') start++;
    if (start >= list.len) { snprintf(buf, cap, "?"); return buf; }
    start++;
  }
  size_t stop = start;
  while (stop < list.len && list.ptr[stop] != '\n') stop++;
  snprintf(buf, cap, "%.*s", (int)(stop - start), list.ptr + start);
  return buf;
}

static XLA_FFI_Error *fail(const Frame *cf, XLA_FFI_Error_Code code, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  XLA_FFI_Error_Create_Args e = {XLA_FFI_Error_Create_Args_STRUCT_SIZE, NULL, msg, code};
  return cf->api->XLA_FFI_Error_Create(&e);
}

/* XLA asks for the FFI version the handler was built against before its first call. */
static XLA_FFI_Error *metadata(const Frame *cf) {
  XLA_FFI_Metadata_Extension *ext = (XLA_FFI_Metadata_Extension *)cf->extension_start;
  XLA_FFI_Api_Version v = {XLA_FFI_Api_Version_STRUCT_SIZE, NULL, XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR};
  ext->metadata->api_version = v;
  ext->metadata->traits = 0;
  return NULL;
}

#define BAD(...) fail(cf, XLA_FFI_Error_Code_INVALID_ARGUMENT, __VA_ARGS__)

__attribute__((visibility("default"))) XLA_FFI_Error *sd_xla_call(XLA_FFI_CallFrame *cf) {
  if (cf->extension_start && cf->extension_start->type == XLA_FFI_Extension_Metadata) return metadata(cf);
  if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  int64_t f_single = 0, f_loop = 0, f_batch = 0, lanes = 1, flops = 0, max_threads = 1, split = 0;
  double tol = 0.0;
  const XLA_FFI_Array *sz = array(cf, "sizes"), *qa = array(cf, "qins"), *qo = array(cf, "quats");
  XLA_FFI_ByteSpan kernel = string(cf, "kernel"), names = string(cf, "names"), joints = string(cf, "joints");
  char a[256], b[256];
  if (!(scalar(cf, "f_single", XLA_FFI_DataType_S64, &f_single, 8) && scalar(cf, "f_loop", XLA_FFI_DataType_S64, &f_loop, 8)
        && scalar(cf, "f_batch", XLA_FFI_DataType_S64, &f_batch, 8) && scalar(cf, "lanes", XLA_FFI_DataType_S64, &lanes, 8)
        && scalar(cf, "flops", XLA_FFI_DataType_S64, &flops, 8)
        && scalar(cf, "max_threads", XLA_FFI_DataType_S64, &max_threads, 8)
        && scalar(cf, "split", XLA_FFI_DataType_S64, &split, 8)
        && scalar(cf, "tol", XLA_FFI_DataType_F64, &tol, 8) && sz && qa && qo))
    return BAD("%.*s: the compiled call is missing attributes", (int)kernel.len, kernel.ptr);
  const int64_t *sizes = (const int64_t *)sz->data, *qins = (const int64_t *)qa->data, *quats = (const int64_t *)qo->data;
  const size_t nin = (size_t)cf->args.size, nout = (size_t)cf->rets.size, n = nin + nout;
  if (n < 1 || n > MAXBUF || sz->size != n)
    return BAD("%.*s: the compiled call got %zu buffers for %zu arguments", (int)kernel.len, kernel.ptr, n, sz->size);
  P p[MAXBUF];
  long N = -1;
  for (size_t i = 0; i < n; i++) {
    const XLA_FFI_Buffer *buf = (const XLA_FFI_Buffer *)(i < nin ? cf->args.args[i] : cf->rets.rets[i - nin]);
    size_t count = 1;
    for (int64_t d = 0; d < buf->rank; d++) count *= (size_t)buf->dims[d];
    p[i] = (P)buf->data;
    if (buf->dtype != XLA_FFI_DataType_F64)
      return BAD("%.*s: %s: the compiled kernel takes float64 arrays", (int)kernel.len, kernel.ptr,
                 item(names, i, a, sizeof a));
    if (sizes[i] > 0) {
      long m = (long)(count / (size_t)sizes[i]);
      if ((size_t)m * (size_t)sizes[i] != count || (N >= 0 && m != N))
        return BAD("%.*s: %s: %zu elements are not whole states of %lld like the other arguments", (int)kernel.len,
                   kernel.ptr, item(names, i, a, sizeof a), count, (long long)sizes[i]);
      N = m;
    }
  }
  if (N <= 0) return NULL;
  for (size_t i = 0; i < nin; i++) {
    const long m = N * (long)sizes[i];
    for (long k = 0; k < m; k++)
      if (!isfinite(p[i][k]))
        return BAD("%.*s: %s: contains NaN or infinite values (state %ld, element %ld)", (int)kernel.len, kernel.ptr,
                   item(names, i, a, sizeof a), k / (long)sizes[i], k % (long)sizes[i]);
  }
  for (size_t g = 0; g < qa->size; g++) {
    const int64_t i = qins[g];
    if (i < 0 || (size_t)i >= nin) continue;
    for (long s = 0; s < N; s++)
      for (size_t j = 0; j < qo->size; j++) {
        const double *x = p[i] + s * sizes[i] + quats[j];
        const double e = fabs(x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3] - 1.0);
        if (!(e <= tol))
          return BAD("%.*s: %s: the quaternion of joint '%s' (%s[%lld:%lld], [x, y, z, w]) of state %ld is not of unit "
                     "norm; normalise it with sparsedyn.normalize", (int)kernel.len, kernel.ptr,
                     item(names, (size_t)i, a, sizeof a), item(joints, j, b, sizeof b), a, (long long)quats[j],
                     (long long)quats[j] + 4, s);
      }
  }
  if (N == 1) {
    call_single(f_single, (int)n, p);
    return NULL;
  }
  double want = (double)N * (double)flops / 1e10 / 0.005;
  int t = want < 1.0 ? 1 : (want > (double)max_threads ? (int)max_threads : (int)want);
  if (t < 1) t = 1;
  const int vec = f_batch != 0 && N >= 2 * lanes;
  const int ok = split && t > 1 ? in_threads(vec, vec ? f_batch : f_loop, N, t, (int)n, p, sizes, vec ? lanes : 1)
                 : vec ? call_batch(f_batch, N, t, (int)n, p) : (call_loop(f_loop, N, t, (int)n, p), 1);
  if (!ok)
    return fail(cf, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "%.*s: the batched kernel could not allocate its work "
                "space", (int)kernel.len, kernel.ptr);
  return NULL;
}
""".replace("DISPATCH", _dispatch_source()).replace("MAXBUF", str(MAX_BUFFERS))

_lock = threading.Lock()
_loaded: dict = {}


def load_handler(compiler, include_dir):
    """``(ctypes library, None)`` holding ``sd_xla_call`` (built once per compiler and headers into the
    build cache), or ``(None, reason)`` when it cannot be built (no C compiler, no FFI headers)."""
    from . import build

    header = Path(include_dir, "xla", "ffi", "api", "c_api.h")
    if not header.is_file():
        return None, f"the XLA FFI headers are missing ({header})"
    if compiler is None:
        return None, "no C compiler (install gcc or clang, or pip install ziglang, or set SPARSEDYN_CC)"
    ident = "\n".join([SOURCE, " ".join(compiler.argv), compiler.ident, str(include_dir),
                       hashlib.sha256(header.read_bytes()).hexdigest()])
    key = hashlib.sha256(ident.encode()).hexdigest()[:32]
    with _lock:
        if key in _loaded:
            return _loaded[key]
        try:
            path = build.sealed_file(f"sd_xla_ffi_{key[:16]}", ".so",
                                     lambda path, side, d: _build(compiler, include_dir, path, side, d))
            result = ctypes.CDLL(str(path)), None
        except (OSError, build.BuildError) as e:
            result = None, f"the FFI handler did not build: {e}"
        _loaded[key] = result
        return result


def _build(compiler, include_dir, path, side, d):
    import sys

    from . import build

    # A build of the handler is said as plain calls say their builds (once per machine and JAX version).
    sys.stdout.flush()
    print(f"sparsedyn: building the XLA FFI handler for JAX (once per JAX version); cached in {d}", file=sys.stderr,
          flush=True)
    flags = [f for f in compiler.flags if f not in ("-fopenmp", "-O1")] + ["-O2", "-pthread", f"-I{include_dir}"]
    build.build_sealed(compiler, flags, "sd_xla_ffi.c", SOURCE, compiler.libs, path, side, d)
