#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <fenv.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define SD_MAXARGS 20
#define SD_MAXQUAT 64
#define SD_MAXSTATIC 4

static PyArray_Descr *f64;          /* the float64 descriptor, kept for allocating results */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;                 /* instance attributes: __doc__, __signature__, __name__... */
    void *fptr;
    int nin, nout;
    int in_ndim[SD_MAXARGS], out_ndim[SD_MAXARGS];
    npy_intp in_shape[SD_MAXARGS][4], out_shape[SD_MAXARGS][4];
    PyObject *fallback;
    double qtol;
    int nquat;
    int quat_in[SD_MAXQUAT], quat_off[SD_MAXQUAT];
    npy_intp in_size[SD_MAXARGS];
} Kernel;

static PyTypeObject KernelType;

/* The kernel on exactly ``nin`` positional arrays, into new arrays or into ``given`` (``out=``:
   one array, or a tuple of one per output, each of exactly the output's shape, float64,
   C-contiguous, writeable and sharing no memory with an input); NULL without an exception set
   when the fast path does not apply (the caller then calls its fallback, which checks and says
   what is wrong). */
/* Whether ``o`` is a float64, aligned, C-contiguous, native-order array (writeable too when
   ``write``) of exactly shape ``shape``. */
static int fits(PyObject *o, int ndim, const npy_intp *shape, int write) {
    if (!PyArray_Check(o)) return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != NPY_DOUBLE || !(write ? PyArray_ISCARRAY(a) : PyArray_ISCARRAY_RO(a))
        || !PyArray_ISNOTSWAPPED(a) || PyArray_NDIM(a) != ndim)
        return 0;
    for (int d = 0; d < ndim; d++)
        if (PyArray_DIM(a, d) != shape[d]) return 0;
    return 1;
}

/* The floating-point flags an overflow, a division by zero or an invalid operation set (sticky, per
   thread).  On x86-64 doubles are computed in SSE registers, so MXCSR holds them, and reading and
   writing it directly costs a few cycles (glibc's feclearexcept also rewrites the x87 environment). */
#if defined(__x86_64__)
#include <immintrin.h>
#define SD_FP_BAD 0x0D                          /* MXCSR: invalid (0), divide by zero (2), overflow (3) */
static inline void fp_clear(void) { _mm_setcsr(_mm_getcsr() & ~SD_FP_BAD); }
static inline int fp_raised(void) { return (_mm_getcsr() & SD_FP_BAD) != 0; }
#else
static inline void fp_clear(void) { feclearexcept(FE_OVERFLOW | FE_INVALID | FE_DIVBYZERO); }
static inline int fp_raised(void) { return fetestexcept(FE_OVERFLOW | FE_INVALID | FE_DIVBYZERO) != 0; }
#endif

/* Whether ``x[0:n]`` holds no NaN or inf (exponent bits all ones): integer tests, which the
   compiler vectorises (-O2 alone does not: the pragma); a sum of x - x would wait on each addition in
   turn.  The exponent field plus one unit of it carries into the sign bit only where it is all ones. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("tree-vectorize")
#endif
static int all_finite(const double *x, npy_intp n) {
    uint64_t bad = 0;
    for (npy_intp j = 0; j < n; j++) {
        uint64_t u;
        memcpy(&u, x + j, sizeof u);
        bad |= (u & 0x7ff0000000000000ULL) + 0x0010000000000000ULL;
    }
    return (bad >> 63) == 0;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* The kernel on its arrays' data ``p`` (its inputs, then its outputs) with Kernel_run's tests of the values:
   1, or 0 where an input holds a NaN or inf, a quaternion is not of unit norm, or an output computed from finite
   inputs is not finite (an overflow; the checked path then says which).  It touches no Python object: a caller
   may run it without the GIL (found_batch's threads). */
static int kernel_go(const Kernel *self, void *const *p) {
    typedef void *V;                /* (a kernel's arguments: pointers to its arrays' data) */
    for (int k = 0; k < self->nin; k++)
        if (!all_finite((const double *)p[k], self->in_size[k])) return 0;
    for (int j = 0; j < self->nquat; j++) {
        const double *x = (const double *)p[self->quat_in[j]] + self->quat_off[j];
        double e = x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3] - 1.0;
        if (!(e <= self->qtol && -e <= self->qtol)) return 0;
    }
    fp_clear();
    switch (self->nin + self->nout) {
    case 1: ((void (*)(V))self->fptr)(p[0]); break;
    case 2: ((void (*)(V, V))self->fptr)(p[0], p[1]); break;
    case 3: ((void (*)(V, V, V))self->fptr)(p[0], p[1], p[2]); break;
    case 4: ((void (*)(V, V, V, V))self->fptr)(p[0], p[1], p[2], p[3]); break;
    case 5: ((void (*)(V, V, V, V, V))self->fptr)(p[0], p[1], p[2], p[3], p[4]); break;
    case 6: ((void (*)(V, V, V, V, V, V))self->fptr)(p[0], p[1], p[2], p[3], p[4], p[5]); break;
    case 7: ((void (*)(V, V, V, V, V, V, V))self->fptr)(p[0], p[1], p[2], p[3], p[4], p[5], p[6]); break;
    case 8: ((void (*)(V, V, V, V, V, V, V, V))self->fptr)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]); break;
    case 9: ((void (*)(V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]); break;
    case 10: ((void (*)(V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]); break;
    case 11: ((void (*)(V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10]); break;
    case 12: ((void (*)(V, V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]); break;
    case 13: ((void (*)(V, V, V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12]); break;
    case 14: ((void (*)(V, V, V, V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13]); break;
    case 15: ((void (*)(V, V, V, V, V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14]);
        break;
    case 16: ((void (*)(V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14],
        p[15]); break;
    case 17: ((void (*)(V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14],
        p[15], p[16]); break;
    case 18: ((void (*)(V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14],
        p[15], p[16], p[17]); break;
    case 19: ((void (*)(V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14],
        p[15], p[16], p[17], p[18]); break;
    default: ((void (*)(V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V, V))self->fptr)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14],
        p[15], p[16], p[17], p[18], p[19]); break;
    }
    /* A NaN or inf computed from finite inputs (an overflow) raised one of these flags on the way;
       then the outputs are scanned, and a non-finite one goes to the checked path, which raises,
       naming it.  Testing the flags costs a few nanoseconds, scanning a mass matrix about one
       microsecond. */
    if (fp_raised()) for (int k = 0; k < self->nout; k++) {
        npy_intp n = 1;
        for (int d = 0; d < self->out_ndim[k]; d++) n *= self->out_shape[k][d];
        if (!all_finite((const double *)p[self->nin + k], n)) return 0;
    }
    return 1;
}

static PyObject *Kernel_run(Kernel *self, PyObject *const *args, PyObject *given) {
    void *p[SD_MAXARGS];
    PyObject *out[SD_MAXARGS];
    if (given) {
        if (self->nout == 1 ? !PyArray_Check(given)
                            : (!PyTuple_Check(given) || PyTuple_GET_SIZE(given) != self->nout)) return NULL;
        for (int k = 0; k < self->nout; k++) {
            PyObject *o = self->nout == 1 ? given : PyTuple_GET_ITEM(given, k);
            if (!fits(o, self->out_ndim[k], self->out_shape[k], 1)) return NULL;
            PyArrayObject *a = (PyArrayObject *)o;
            /* no overlap with an input or another output: the kernel's pointers are restrict */
            const char *lo = PyArray_DATA(a), *hi = lo + PyArray_NBYTES(a);
            for (int j = 0; j < self->nin + k; j++) {
                PyArrayObject *b = (PyArrayObject *)(j < self->nin ? args[j]
                                   : (self->nout == 1 ? given : PyTuple_GET_ITEM(given, j - self->nin)));
                if (!PyArray_Check((PyObject *)b)) return NULL;
                const char *blo = PyArray_DATA(b), *bhi = blo + PyArray_NBYTES(b);
                if (lo < bhi && blo < hi) return NULL;
            }
        }
    }
    for (int k = 0; k < self->nin; k++) {
        if (!fits(args[k], self->in_ndim[k], self->in_shape[k], 0)) return NULL;
        p[k] = PyArray_DATA((PyArrayObject *)args[k]);
    }
    for (int k = 0; k < self->nout; k++) {
        if (given) {
            out[k] = self->nout == 1 ? given : PyTuple_GET_ITEM(given, k);
            Py_INCREF(out[k]);
        } else {
            Py_INCREF(f64);
            out[k] = PyArray_NewFromDescr(&PyArray_Type, f64, self->out_ndim[k], self->out_shape[k], NULL, NULL, 0,
                                          NULL);
            if (!out[k]) { for (int j = 0; j < k; j++) Py_DECREF(out[j]); return NULL; }
        }
        p[self->nin + k] = PyArray_DATA((PyArrayObject *)out[k]);
    }
    /* (NaN or inf anywhere: the checked path says which argument) */
    if (!kernel_go(self, p)) {
        for (int k = 0; k < self->nout; k++) Py_DECREF(out[k]);
        return NULL;
    }
    if (self->nout == 1) return out[0];
    if (given) {                                /* the caller's tuple, as the Python path returns it */
        for (int k = 0; k < self->nout; k++) Py_DECREF(out[k]);
        Py_INCREF(given);
        return given;
    }
    PyObject *t = PyTuple_New(self->nout);
    if (!t) { for (int k = 0; k < self->nout; k++) Py_DECREF(out[k]); return NULL; }
    for (int k = 0; k < self->nout; k++) PyTuple_SET_ITEM(t, k, out[k]);
    return t;
}

/* A flat list or tuple of ``n`` floats (NumPy's float64 among them: a subclass) or ints (not bools) as a new
   float64 array: one state written as plain Python numbers; NULL, no exception, for anything else. */
static PyObject *flat_reals(PyObject *o, npy_intp n) {
    if (!(PyList_CheckExact(o) || PyTuple_CheckExact(o)) || PySequence_Fast_GET_SIZE(o) != n) return NULL;
    PyObject **items = PySequence_Fast_ITEMS(o);
    PyObject *a = PyArray_SimpleNew(1, &n, NPY_DOUBLE);
    if (!a) { PyErr_Clear(); return NULL; }
    double *d = (double *)PyArray_DATA((PyArrayObject *)a);
    for (npy_intp i = 0; i < n; i++) {
        PyObject *x = items[i];
        if (PyFloat_Check(x)) d[i] = PyFloat_AsDouble(x);
        else if (PyLong_CheckExact(x)) d[i] = PyLong_AsDouble(x);       /* (too large for a double: an error) */
        else { Py_DECREF(a); return NULL; }
        if (d[i] == -1.0 && PyErr_Occurred()) { PyErr_Clear(); Py_DECREF(a); return NULL; }
    }
    return a;
}

/* Kernel_run where some of the vector inputs are flat lists or tuples of numbers (flat_reals): on those
   made arrays; NULL, no exception, where none is or the kernel declines them (then the fallback). */
static PyObject *Kernel_run_lists(Kernel *self, PyObject *const *args, PyObject *given) {
    PyObject *conv[SD_MAXARGS], *in[SD_MAXARGS], *r = NULL;
    int any = 0;
    for (int k = 0; k < self->nin; k++) {
        conv[k] = !PyArray_Check(args[k]) && self->in_ndim[k] == 1 ? flat_reals(args[k], self->in_shape[k][0]) : NULL;
        in[k] = conv[k] ? conv[k] : args[k];
        any |= conv[k] != NULL;
    }
    if (any) r = Kernel_run(self, in, given);
    for (int k = 0; k < self->nin; k++) Py_XDECREF(conv[k]);
    return r;
}

static PyObject *call_fallback(PyObject *fallback, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyErr_Occurred()) return NULL;
    return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

static PyObject *Kernel_vectorcall(Kernel *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if ((kwnames && PyTuple_GET_SIZE(kwnames)) || nargs != self->nin)
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *r = Kernel_run(self, args, NULL);
    if (!r && !PyErr_Occurred()) r = Kernel_run_lists(self, args, NULL);
    return r ? r : call_fallback(self->fallback, args, nargsf, kwnames);
}

static int Kernel_traverse(Kernel *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    Py_VISIT(self->fallback);
    return 0;
}

static int Kernel_clear(Kernel *self) {
    Py_CLEAR(self->dict);
    Py_CLEAR(self->fallback);
    return 0;
}

static void Kernel_dealloc(Kernel *self) {
    PyObject_GC_UnTrack(self);
    Kernel_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int shape_of(PyObject *t, npy_intp *shape, int *ndim) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > 4) return -1;
    *ndim = (int)PyTuple_GET_SIZE(t);
    for (int k = 0; k < *ndim; k++) {
        shape[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, k));
        if (shape[k] < 0) return -1;
    }
    return 0;
}

static int Kernel_init(Kernel *self, PyObject *args, PyObject *kw) {
    PyObject *fptr, *ins, *outs, *fallback, *quats = NULL;
    if (!PyArg_ParseTuple(args, "OO!O!O|O", &fptr, &PyTuple_Type, &ins, &PyTuple_Type, &outs, &fallback, &quats))
        return -1;
    self->vectorcall = (vectorcallfunc)Kernel_vectorcall;
    self->nquat = 0;
    self->qtol = 0.0;
    if (quats && quats != Py_None) {
        PyObject *groups;
        if (!PyArg_ParseTuple(quats, "dO!", &self->qtol, &PyTuple_Type, &groups)) return -1;
        for (Py_ssize_t g = 0; g < PyTuple_GET_SIZE(groups); g++) {
            int idx; PyObject *offs;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(groups, g), "iO!", &idx, &PyTuple_Type, &offs)) return -1;
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(offs); j++) {
                if (self->nquat >= SD_MAXQUAT) { PyErr_SetString(PyExc_ValueError, "too many quaternions"); return -1; }
                self->quat_in[self->nquat] = idx;
                self->quat_off[self->nquat++] = (int)PyLong_AsLong(PyTuple_GET_ITEM(offs, j));
            }
        }
        if (PyErr_Occurred()) return -1;
    }
    self->fptr = PyLong_AsVoidPtr(fptr);
    if (!self->fptr) { if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "null function pointer"); return -1; }
    self->nin = (int)PyTuple_GET_SIZE(ins);
    self->nout = (int)PyTuple_GET_SIZE(outs);
    if (self->nin + self->nout > SD_MAXARGS || self->nout < 1) {
        PyErr_SetString(PyExc_ValueError, "unsupported number of arguments");
        return -1;
    }
    for (int k = 0; k < self->nin; k++) {
        if (shape_of(PyTuple_GET_ITEM(ins, k), self->in_shape[k], &self->in_ndim[k]) < 0) {
            PyErr_SetString(PyExc_ValueError, "bad input shape"); return -1;
        }
        self->in_size[k] = 1;
        for (int d = 0; d < self->in_ndim[k]; d++) self->in_size[k] *= self->in_shape[k][d];
    }
    for (int j = 0; j < self->nquat; j++)
        if (self->quat_in[j] < 0 || self->quat_in[j] >= self->nin || self->quat_off[j] < 0
            || self->quat_off[j] + 4 > self->in_size[self->quat_in[j]]) {
            PyErr_SetString(PyExc_ValueError, "quaternion offset out of range"); return -1;
        }
    for (int k = 0; k < self->nout; k++)
        if (shape_of(PyTuple_GET_ITEM(outs, k), self->out_shape[k], &self->out_ndim[k]) < 0) {
            PyErr_SetString(PyExc_ValueError, "bad output shape"); return -1;
        }
    Py_INCREF(fallback); Py_XSETREF(self->fallback, fallback);
    return 0;
}

static PyObject *self_get(PyObject *self, PyObject *obj, PyObject *type) { Py_INCREF(self); return self; }

/* The members and type object of a callable type ``T`` (vectorcall, instance dict, GC). */
#define SD_MEMBERS(T)                                                                         \
    {"__dictoffset__", T_PYSSIZET, offsetof(T, dict), READONLY},                              \
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(T, vectorcall), READONLY},

#define SD_CALLABLE_TYPE(T, DOC)                                                              \
static PyTypeObject T##Type = {                                                               \
    PyVarObject_HEAD_INIT(NULL, 0)                                                            \
    .tp_name = "sparsedyn_fastcall." #T,                                                      \
    .tp_basicsize = sizeof(T),                                                                \
    .tp_dealloc = (destructor)T##_dealloc,                                                    \
    .tp_vectorcall_offset = offsetof(T, vectorcall),                                          \
    .tp_call = PyVectorcall_Call,                                                             \
    .tp_getattro = PyObject_GenericGetAttr,                                                   \
    .tp_setattro = PyObject_GenericSetAttr,                                                   \
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,         \
    .tp_doc = DOC,                                                                            \
    .tp_traverse = (traverseproc)T##_traverse,                                                \
    .tp_clear = (inquiry)T##_clear,                                                           \
    .tp_members = T##_members,                                                                \
    .tp_descr_get = self_get,   /* a routine for inspect and pydoc, bound to nothing */        \
    .tp_dictoffset = offsetof(T, dict),                                                       \
    .tp_init = (initproc)T##_init,                                                            \
    .tp_new = PyType_GenericNew,                                                              \
};

static PyMemberDef Kernel_members[] = {SD_MEMBERS(Kernel) {NULL}};
SD_CALLABLE_TYPE(Kernel, "A compiled kernel for one state; every other call goes to its fallback.")

/* A method of a compiled model: ``nin`` state arrays, then ``nstatic`` static arguments (by
   position or by keyword; the last ones with defaults) that select a Kernel from ``table``
   (a dict the Python side fills as variants are built; key: the tuple of the static arguments).
   Anything else, or a call the selected Kernel does not take, goes to ``fallback``. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *fallback, *table, *names, *defaults;
    int nin, nstatic, nreq;
} Method;

static PyObject *Method_vectorcall(Method *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *st[SD_MAXSTATIC], *given = NULL;
    if (nargs < self->nin || nargs > self->nin + self->nstatic) goto slow;
    for (int j = 0; j < self->nstatic; j++) st[j] = NULL;
    for (Py_ssize_t j = self->nin; j < nargs; j++) st[j - self->nin] = args[j];
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int hit = -1;
        if (PyUnicode_CompareWithASCIIString(name, "out") == 0) {
            if (args[nargs + k] == Py_None) continue;
            given = args[nargs + k];
            continue;
        }
        for (int j = 0; j < self->nstatic; j++) {
            PyObject *n = PyTuple_GET_ITEM(self->names, j);
            if (n == name || PyUnicode_Compare(n, name) == 0) { hit = j; break; }
        }
        if (PyErr_Occurred()) return NULL;
        if (hit < 0 || st[hit]) goto slow;
        st[hit] = args[nargs + k];
    }
    for (int j = 0; j < self->nstatic; j++)
        if (!st[j]) {
            if (j < self->nreq) goto slow;
            st[j] = PyTuple_GET_ITEM(self->defaults, j - self->nreq);
        }
    PyObject *key = PyTuple_New(self->nstatic);
    if (!key) return NULL;
    for (int j = 0; j < self->nstatic; j++) { Py_INCREF(st[j]); PyTuple_SET_ITEM(key, j, st[j]); }
    PyObject *kern = PyDict_GetItemWithError(self->table, key);     /* borrowed */
    Py_DECREF(key);
    if (!kern) { if (PyErr_Occurred()) PyErr_Clear(); goto slow; }    /* unhashable: the slow path */
    if (Py_TYPE(kern) != &KernelType) goto slow;
    PyObject *r = Kernel_run((Kernel *)kern, args, given);
    if (!r && !PyErr_Occurred()) r = Kernel_run_lists((Kernel *)kern, args, given);
    if (r || PyErr_Occurred()) return r;
slow:
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int Method_init(Method *self, PyObject *args, PyObject *kw) {
    PyObject *fallback, *table, *names, *defaults;
    int nin;
    if (!PyArg_ParseTuple(args, "OO!iO!O!", &fallback, &PyDict_Type, &table, &nin, &PyTuple_Type, &names,
                          &PyTuple_Type, &defaults))
        return -1;
    if (nin < 0 || nin > SD_MAXARGS || PyTuple_GET_SIZE(names) > SD_MAXSTATIC
        || PyTuple_GET_SIZE(defaults) > PyTuple_GET_SIZE(names)) {
        PyErr_SetString(PyExc_ValueError, "unsupported number of arguments");
        return -1;
    }
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(names); j++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, j))) { PyErr_SetString(PyExc_TypeError, "names"); return -1; }
    self->vectorcall = (vectorcallfunc)Method_vectorcall;
    self->nin = nin;
    self->nstatic = (int)PyTuple_GET_SIZE(names);
    self->nreq = self->nstatic - (int)PyTuple_GET_SIZE(defaults);
    Py_INCREF(fallback); Py_XSETREF(self->fallback, fallback);
    Py_INCREF(table); Py_XSETREF(self->table, table);
    Py_INCREF(names); Py_XSETREF(self->names, names);
    Py_INCREF(defaults); Py_XSETREF(self->defaults, defaults);
    return 0;
}

static int Method_traverse(Method *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict); Py_VISIT(self->fallback); Py_VISIT(self->table);
    Py_VISIT(self->names); Py_VISIT(self->defaults);
    return 0;
}

static int Method_clear(Method *self) {
    Py_CLEAR(self->dict); Py_CLEAR(self->fallback); Py_CLEAR(self->table);
    Py_CLEAR(self->names); Py_CLEAR(self->defaults);
    return 0;
}

static void Method_dealloc(Method *self) {
    PyObject_GC_UnTrack(self);
    Method_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* __table__: the kernels built so far, by the tuple of their static arguments (the fused scene step
   picks its two kernels from their methods' tables once per layout) */
static PyMemberDef Method_members[] = {SD_MEMBERS(Method)
    {"__table__", T_OBJECT, offsetof(Method, table), READONLY}, {NULL}};
SD_CALLABLE_TYPE(Method, "A method of a compiled model: the compiled kernel of its static arguments, else its fallback.")

/* The front of a public function ``sd.f(model, *args, **kwargs)`` (a Python function): set as that
   function's vectorcall (``front(function, ...)``), it answers with no Python frame the calls that
   the function's body hands straight to the model's native callable, and hands every other call to
   the body.  The rule is the body's own: the callable is ``tables[id(model)][name]``, ``tables``
   being the function's global named ``table`` (no entry: the body); the call fits when it gives,
   after the model, the ``nin`` state arrays by position and the static arguments (``nmin`` to
   ``nfast`` positional arguments without keywords; with keywords: each a static argument not
   given by position, the required ones given), and each sequence static argument given is a
   tuple (the body takes a list as the tuple of its items).  ``result`` (or None): the named tuple
   the callable's plain tuple becomes. */
#define SD_MAXFRONT 8

typedef struct {
    PyObject_HEAD
    PyObject *table, *name, *result;
    int nin, nmin, nfast, nstatic, nseq;
    PyObject *static_names[SD_MAXFRONT], *seq_names[SD_MAXFRONT];
    int static_pos[SD_MAXFRONT];        /* position among the static arguments given by position, or -1 */
    int static_required[SD_MAXFRONT];
    int seq_pos[SD_MAXFRONT];           /* position after the model, or -1 */
} Front;

static PyTypeObject FrontType;
static PyObject *front_key;             /* "__sparsedyn_front__": where a function keeps its Front */
static vectorcallfunc function_body;    /* a Python function's own vectorcall (runs its code) */

static int name_is(PyObject *a, PyObject *b) {
    return a == b || PyUnicode_Compare(a, b) == 0;
}

/* Whether a call with ``n`` positional arguments after the model and the keywords ``kwnames`` fits. */
static int keywords_fit(Front *fr, Py_ssize_t n, PyObject *kwnames) {
    Py_ssize_t j = n - fr->nin, npos = fr->nfast - fr->nin;       /* static arguments by position */
    if (j < 0 || j > npos) return 0;
    int required = 0, needed = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
        int s = 0;
        while (s < fr->nstatic && !name_is(fr->static_names[s], PyTuple_GET_ITEM(kwnames, k))) s++;
        if (s == fr->nstatic || (fr->static_pos[s] >= 0 && fr->static_pos[s] < j)) return 0;
        required += fr->static_required[s];
    }
    for (int s = 0; s < fr->nstatic; s++)
        needed += fr->static_required[s] && !(fr->static_pos[s] >= 0 && fr->static_pos[s] < j);
    return required == needed;
}

/* Which native callable answers a call that fits (borrowed), or NULL (then the body answers). */
static PyObject *direct_callable(Front *fr, PyObject *func, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
    Py_ssize_t n = nargs - 1, nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw ? !keywords_fit(fr, n, kwnames) : (n < fr->nmin || n > fr->nfast)) return NULL;
    for (int s = 0; s < fr->nseq; s++) {
        PyObject *x = NULL;
        if (fr->seq_pos[s] >= 0 && fr->seq_pos[s] < n) x = args[1 + fr->seq_pos[s]];
        else for (Py_ssize_t k = 0; k < nkw; k++)
            if (name_is(fr->seq_names[s], PyTuple_GET_ITEM(kwnames, k))) x = args[nargs + k];
        if (x && !PyTuple_CheckExact(x)) return NULL;
    }
    PyObject *tables = PyDict_GetItemWithError(((PyFunctionObject *)func)->func_globals, fr->table);
    if (!tables || !PyDict_Check(tables)) return NULL;
    PyObject *id = PyLong_FromVoidPtr(args[0]);           /* id(model), the table's key */
    if (!id) return NULL;
    PyObject *calls = PyDict_GetItemWithError(tables, id);
    Py_DECREF(id);
    return calls && PyDict_Check(calls) ? PyDict_GetItemWithError(calls, fr->name) : NULL;
}

static PyObject *front_call(PyObject *func, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *d = ((PyFunctionObject *)func)->func_dict;
    PyObject *fr = d && nargs >= 1 ? PyDict_GetItemWithError(d, front_key) : NULL;
    PyObject *f = fr && Py_TYPE(fr) == &FrontType ? direct_callable((Front *)fr, func, args, nargs, kwnames) : NULL;
    if (!f) {
        if (PyErr_Occurred()) return NULL;
        return function_body(func, args, nargsf, kwnames);
    }
    PyObject *result = ((Front *)fr)->result;
    Py_INCREF(f);                       /* borrowed from tables that may change while it runs */
    Py_INCREF(result);
    PyObject *r = PyObject_Vectorcall(f, args + 1, nargs - 1, kwnames);
    Py_DECREF(f);
    if (r && result != Py_None) {       /* result(*r) */
        PyObject *t = PySequence_Tuple(r);
        Py_DECREF(r);
        r = t ? PyObject_Call(result, t, NULL) : NULL;
        Py_XDECREF(t);
    }
    Py_DECREF(result);
    return r;
}

static int Front_traverse(Front *self, visitproc visit, void *arg) {
    Py_VISIT(self->result);
    return 0;
}

static int Front_clear(Front *self) {
    Py_CLEAR(self->result);
    return 0;
}

static void Front_dealloc(Front *self) {
    PyObject_GC_UnTrack(self);
    Front_clear(self);
    Py_XDECREF(self->table);
    Py_XDECREF(self->name);
    for (int s = 0; s < self->nstatic; s++) Py_XDECREF(self->static_names[s]);
    for (int s = 0; s < self->nseq; s++) Py_XDECREF(self->seq_names[s]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject FrontType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sparsedyn_fastcall.Front",
    .tp_basicsize = sizeof(Front),
    .tp_dealloc = (destructor)Front_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The direct road of a public function (see front()).",
    .tp_traverse = (traverseproc)Front_traverse,
    .tp_clear = (inquiry)Front_clear,
};

static void set_vectorcall(PyObject *func, vectorcallfunc call) {
#if PY_VERSION_HEX >= 0x030C0000
    PyFunction_SetVectorcall((PyFunctionObject *)func, call);
#else
    ((PyFunctionObject *)func)->vectorcall = call;    /* what PyFunction_SetVectorcall does from 3.12 */
#endif
}

/* front(function, table, name, nin, nmin, nfast, statics, sequences, result): the front above
   before ``function``; statics: ((name, position or -1, required), ...); sequences: ((position or -1,
   name), ...).  front(function, None): the function's own vectorcall again. */
static PyObject *front(PyObject *mod, PyObject *args) {
    PyObject *func, *table = Py_None, *name = NULL, *statics = NULL, *sequences = NULL, *result = NULL;
    int nin = 0, nmin = 0, nfast = 0;
    if (!PyArg_ParseTuple(args, "O!O|UiiiO!O!O", &PyFunction_Type, &func, &table, &name, &nin, &nmin, &nfast,
                          &PyTuple_Type, &statics, &PyTuple_Type, &sequences, &result))
        return NULL;
    PyFunctionObject *fn = (PyFunctionObject *)func;
    if (fn->vectorcall != front_call) {
        if (function_body && fn->vectorcall != function_body) {
            PyErr_SetString(PyExc_ValueError, "front: the function's vectorcall is not a Python function's");
            return NULL;
        }
        function_body = fn->vectorcall;
    }
    if (table == Py_None) {
        set_vectorcall(func, function_body);
        if (PyObject_HasAttr(func, front_key) && PyObject_DelAttr(func, front_key) < 0) return NULL;
        Py_RETURN_NONE;
    }
    if (!PyUnicode_Check(table) || !result || PyTuple_GET_SIZE(statics) > SD_MAXFRONT
        || PyTuple_GET_SIZE(sequences) > SD_MAXFRONT) {
        PyErr_SetString(PyExc_ValueError, "front: unsupported arguments");
        return NULL;
    }
    Front *fr = PyObject_GC_New(Front, &FrontType);
    if (!fr) return NULL;
    fr->nstatic = fr->nseq = 0;
    Py_INCREF(table); fr->table = table;
    Py_INCREF(name); fr->name = name;
    Py_INCREF(result); fr->result = result;
    fr->nin = nin; fr->nmin = nmin; fr->nfast = nfast;
    for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(statics); s++) {
        PyObject *sname;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(statics, s), "Uip", &sname, &fr->static_pos[s], &fr->static_required[s]))
            goto fail;
        Py_INCREF(sname); fr->static_names[fr->nstatic++] = sname;
    }
    for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(sequences); s++) {
        PyObject *sname;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(sequences, s), "iU", &fr->seq_pos[s], &sname)) goto fail;
        Py_INCREF(sname); fr->seq_names[fr->nseq++] = sname;
    }
    PyObject_GC_Track(fr);
    if (PyObject_SetAttr(func, front_key, (PyObject *)fr) < 0) { Py_DECREF(fr); return NULL; }
    Py_DECREF(fr);
    set_vectorcall(func, front_call);
    Py_RETURN_NONE;
fail:
    Py_DECREF(fr);
    return NULL;
}

/* scene_step(plan, q, v, tau, settings, warm): one time step in a scene whose pairs are all the collision
   kernel's, in one call: the collision kernel with its look-ahead (``collide``: q, v, shapes, reach,
   look -> candidates (K, 11), cutoffs (K,)), the candidates within their cutoff laid out in the
   step's slots, and the step's kernel (``solve``: q, v, tau, settings, warm start (ns, 3), slot data
   -> its arrays).  ``warm``: None, or impulses (m, 3) to start from (float64, C-contiguous), each
   contact's put in its slot where m is the number of contacts, else none (zeros), or a callable
   ``warm(sel, slot, candidates, data)`` called once the contacts are laid out (sel (nc,) int64: each
   contact's candidate, slot (nc,) int64: its per-body slot, the candidates (K, 11), the slot data)
   that returns such impulses (a trajectory's warm start, matched from the step before's contacts).  ``plan``: (collide, shapes, reach, look, solve, kid (K,) int64: each
   candidate's slot key, mu (K,): its friction, first (nk,), end (nk,) int64: each key's per-body
   slots, base (ns, width): the slots' data with every slot free, W (nk, nv) or None: each key's
   joint weights, mode (0: per-body slots of width 8, each contact's point in its body; 1: data slots
   of width 8 + nv, the contacts in the first slots, each point on ``a`` in the world), capacity, margin,
   patch depth: where more candidates than the capacity lie within their cutoffs, the widest gaps beyond
   the step's reach are left out as look_ahead.capacity_mask leaves them out (the scene's margin and
   reduction.PATCH_DEPTH)).
   The rows and their order are the Python road's (scene_data: _selection, _data_slots), entry by
   entry the same arithmetic.  Returns ``(the step's arrays, index)`` (index: each contact's slot,
   int64, or None where the contacts fill every slot in order), or None where this road does not
   apply (a kernel's fast path declines, more contacts than the capacity, a key with more contacts
   than its per-body slots where the step runs in them or returns its layout, more than the data
   slots, a warm start of the contacts' shape that is not finite): the caller then takes the Python
   road.  In data slots a key's contacts past its per-body slots take slots after them in ``slot``
   (which the step does not read).  ``found`` (a 7th argument, optional): the
   candidates found already, ``(rows (K, 11), cutoffs (K,))`` float64 in the collision kernel's output
   format (a scene with pairs of no closed form, robot meshes on world planes: the kernel's candidates
   and the mesh rows, found by the caller), K the plan's, or ``(rows, cutoffs, stages)``: buffers that
   ``stages`` (run_stages') fill in the call before they are read (pairs of two boxes: the bodies'
   velocities, the shapes' placements, the box-box routine, the collision kernel); ``collide``,
   ``shapes``, ``reach`` and ``look`` are then unused (None allowed).  ``chain`` (an 8th argument, optional; a trajectory's step):
   ``(pair (K,) int64: each candidate's scene pair, radius, previous)``, ``previous`` None or the step
   before's contacts ``(pair (np,) int64, rows (np, 7) float64: [p (3), n (3), offset], impulses (np, 3)
   float64)``; the contacts' rows are then the candidates' [w_a in a's body (3), n (3), n . w_b] (a plan
   whose slot frames are their bodies' own), the warm start is matched from ``previous`` here
   (warm_match.c: match_plain, match_general) and asked of ``warm`` (then a callable) where that cannot
   answer (memory ran out, or ``previous``'s arrays are not of these dtypes, C-contiguous), and the call
   returns ``(the step's arrays, index, pair (nc,), rows (nc, 7), impulses (nc, 3))`` (the impulses in
   the contacts' order): what the next step's ``previous`` needs (in data slots that do not hold the
   step's contacts, their number instead, an int: the caller may grow the slots); ``warm`` (the callable) is then
   called with ``previous`` as a fifth argument.  ``chain`` True instead (no trajectory): the call
   returns ``(the step's arrays, index, sel, slot, candidates, data)``, the arguments a callable ``warm``
   would be given (the contacts' layout, what a caller that reads it needs) beside the step's answer,
   with no call back into Python. */
#define SD_MAXKEYS 1024
#define SD_MAXCONTACTS 256

static PyArrayObject *plan_array(PyObject *o, int ndim, int type) {
    if (!PyArray_Check(o)) return NULL;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != type || !PyArray_ISCARRAY_RO(a) || !PyArray_ISNOTSWAPPED(a) || PyArray_NDIM(a) != ndim)
        return NULL;
    return a;
}

#include "warm_match.c"   /* (pasted in here by fastcall.py: the warm start's matching) */

/* The stages that find a step's candidates in the call (``found``'s third entry, scene_step's), run in
   order: a tuple of ``(kernel, ins, out)``, a Kernel run on ``ins`` (a tuple of its inputs, the ints 0
   and 1 standing for the call's q and v) into ``out`` (its output array, or tuple of them), and
   ``(address, plan, buf)``, a C routine ``int f(const long long *plan, double *buf)`` at ``address``
   (an int) on ``plan`` (int64) and ``buf`` (float64, writeable), both 1-d and C-contiguous, and
   ``(order, rows, out)``, a gather of rows: ``out[i] = rows[order[i]]`` (order (n,) int64, rows (m, w),
   out (n, w) float64, C-contiguous, out writeable and apart from rows).  Returns 1
   once all ran, 0 where a kernel's fast path or a routine declines (a nonzero return; no exception set: the
   step answers None), -1 on an error. */
static int run_stages(PyObject *stages, PyObject *q, PyObject *v) {
    if (!PyTuple_Check(stages)) goto bad;
    for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(stages); s++) {
        PyObject *st = PyTuple_GET_ITEM(stages, s);
        if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) != 3) goto bad;
        PyObject *a = PyTuple_GET_ITEM(st, 0), *b = PyTuple_GET_ITEM(st, 1), *c = PyTuple_GET_ITEM(st, 2);
        if (Py_TYPE(a) == &KernelType) {
            Kernel *k = (Kernel *)a;
            PyObject *in[SD_MAXARGS];
            if (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) != k->nin || c == Py_None) goto bad;
            for (int j = 0; j < k->nin; j++) {
                PyObject *x = PyTuple_GET_ITEM(b, j);
                in[j] = PyLong_CheckExact(x) ? (PyLong_AsLong(x) == 0 ? q : v) : x;
            }
            PyObject *r = Kernel_run(k, in, c);
            if (!r) return PyErr_Occurred() ? -1 : 0;
            Py_DECREF(r);
        } else if (PyLong_CheckExact(a)) {
            PyArrayObject *p = plan_array(b, 1, NPY_INT64), *x = plan_array(c, 1, NPY_DOUBLE);
            void *f = PyLong_AsVoidPtr(a);
            if (!p || !x || !f || !PyArray_ISWRITEABLE(x)) goto bad;
            if (((int (*)(const long long *, double *))f)(PyArray_DATA(p), PyArray_DATA(x))) return 0;
        } else if (PyArray_Check(a)) {
            PyArrayObject *o = plan_array(a, 1, NPY_INT64), *x = plan_array(b, 2, NPY_DOUBLE), *y = plan_array(c, 2, NPY_DOUBLE);
            if (!o || !x || !y || !PyArray_ISWRITEABLE(y) || PyArray_DIM(o, 0) != PyArray_DIM(y, 0)
                || PyArray_DIM(x, 1) != PyArray_DIM(y, 1)) goto bad;
            npy_intp n = PyArray_DIM(x, 0), w = PyArray_DIM(x, 1);
            const int64_t *at = PyArray_DATA(o);
            const double *from = PyArray_DATA(x);
            double *to = PyArray_DATA(y);
            for (npy_intp i = 0; i < PyArray_DIM(o, 0); i++) {
                if (at[i] < 0 || at[i] >= n) goto bad;
                memcpy(to + w * i, from + w * at[i], w * sizeof(double));
            }
        } else goto bad;
    }
    return 1;
bad:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "scene_step: the stages do not fit");
    return -1;
}

/* look_ahead.capacity_mask's rule, where more than ``capacity`` of the K candidates ``c`` (K, 11) lie
   within their cutoffs ``within`` (K,): the widest gaps beyond the step's reach (d > cutoff - margin +
   patch), widest first, ties in order, as many as exceed the capacity or all of them where they are
   fewer: ``*out`` a new array of K flags (free it) where some are left out, else NULL (none allocated).  Returns 0, -1 where memory fails (an exception set). */
static int capacity_drop(npy_intp K, const double *c, const double *within, long capacity, double margin,
                         double patch, unsigned char **out) {
    npy_intp n = 0, nb = 0;
    *out = NULL;
    for (npy_intp j = 0; j < K; j++) n += c[11 * j] < within[j];
    if (n <= capacity) return 0;
    npy_intp *b = malloc((size_t)n * sizeof *b);
    unsigned char *drop = calloc((size_t)K, 1);
    if (!b || !drop) { free(b); free(drop); PyErr_NoMemory(); return -1; }
    for (npy_intp j = 0; j < K; j++)
        if (c[11 * j] < within[j] && c[11 * j] > within[j] - margin + patch) b[nb++] = j;
    for (npy_intp i = 1; i < nb; i++) {                      /* widest first, a stable insertion sort */
        npy_intp x = b[i], k = i;
        for (; k > 0 && c[11 * b[k - 1]] < c[11 * x]; k--) b[k] = b[k - 1];
        b[k] = x;
    }
    for (npy_intp i = 0; i < nb && i < n - capacity; i++) drop[b[i]] = 1;
    free(b);
    *out = drop;
    return 0;
}

static PyObject *scene_step(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 6 || nargs > 8 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 15) {
        PyErr_SetString(PyExc_TypeError, "scene_step(plan, q, v, tau, settings, warm[, found[, chain]])");
        return NULL;
    }
    PyObject *pre = nargs >= 7 && args[6] != Py_None ? args[6] : NULL;
    PyObject *chain = nargs == 8 && args[7] != Py_None ? args[7] : NULL;
    int layout_out = chain == Py_True;                       /* the contacts' layout returned */
    if (layout_out) chain = NULL;
    PyObject *matcher = PyCallable_Check(args[5]) ? args[5] : NULL, *answer = NULL;
    PyArrayObject *given = args[5] == Py_None || matcher ? NULL : plan_array(args[5], 2, NPY_DOUBLE);
    if (args[5] != Py_None && !matcher && (!given || PyArray_DIM(given, 1) != 3)) Py_RETURN_NONE;  /* (not impulses) */
    PyObject *const *P = &PyTuple_GET_ITEM(args[0], 0);
    Kernel *collide = (Kernel *)P[0], *solve = (Kernel *)P[4];
    if ((!pre && (Py_TYPE(P[0]) != &KernelType || collide->nin != 5 || collide->nout != 2
                  || collide->out_ndim[0] != 2 || collide->out_shape[0][1] != 11))
        || Py_TYPE(P[4]) != &KernelType || solve->nin != 6 || solve->in_ndim[4] != 2 || solve->in_ndim[5] != 2) {
        PyErr_SetString(PyExc_TypeError, "scene_step: the plan's kernels do not fit");
        return NULL;
    }
    PyArrayObject *kid = plan_array(P[5], 1, NPY_INT64), *mu = plan_array(P[6], 1, NPY_DOUBLE),
                  *first = plan_array(P[7], 1, NPY_INT64), *end = plan_array(P[8], 1, NPY_INT64),
                  *base = plan_array(P[9], 2, NPY_DOUBLE),
                  *W = P[10] == Py_None ? NULL : plan_array(P[10], 2, NPY_DOUBLE);
    long mode = PyLong_AsLong(P[11]), capacity = PyLong_AsLong(P[12]);
    double margin = PyFloat_AsDouble(P[13]), patch = PyFloat_AsDouble(P[14]);
    if (PyErr_Occurred()) return NULL;
    npy_intp K = kid ? PyArray_DIM(kid, 0) : 0, nk = first ? PyArray_DIM(first, 0) : 0;
    if (!pre && kid && collide->out_shape[0][0] != K) K = -1;        /* (refused below) */
    npy_intp ns = base ? PyArray_DIM(base, 0) : 0, width = base ? PyArray_DIM(base, 1) : 0;
    if (!kid || !mu || !first || !end || !base || PyArray_DIM(kid, 0) != K || PyArray_DIM(mu, 0) != K
        || PyArray_DIM(end, 0) != nk || (mode != 0 && mode != 1) || solve->in_shape[4][0] != ns || solve->in_shape[4][1] != 3 || solve->in_shape[5][0] != ns
        || solve->in_shape[5][1] != width || (mode == 0 ? width != 8 : (!W || PyArray_DIM(W, 0) != nk
                                                                         || width != 8 + PyArray_DIM(W, 1)))) {
        PyErr_SetString(PyExc_TypeError, "scene_step: the plan's arrays do not fit");
        return NULL;
    }
    if (nk > SD_MAXKEYS || capacity > SD_MAXCONTACTS) Py_RETURN_NONE;     /* more than this road holds */
    const int64_t *key = PyArray_DATA(kid), *f0 = PyArray_DATA(first), *f1 = PyArray_DATA(end);
    for (npy_intp j = 0; j < K; j++)
        if (key[j] < 0 || key[j] >= nk) { PyErr_SetString(PyExc_ValueError, "scene_step: a key out of range"); return NULL; }
    PyArrayObject *every = NULL, *q0 = NULL, *r0 = NULL, *l0 = NULL;     /* the chain's (a trajectory's step) */
    double radius = 0.0;
    if (chain) {
        PyObject *prev = PyTuple_Check(chain) && PyTuple_GET_SIZE(chain) == 3 ? PyTuple_GET_ITEM(chain, 2) : NULL;
        every = prev ? plan_array(PyTuple_GET_ITEM(chain, 0), 1, NPY_INT64) : NULL;
        if (every) radius = PyFloat_AsDouble(PyTuple_GET_ITEM(chain, 1));
        if (every && prev != Py_None) {
            if (PyTuple_Check(prev) && PyTuple_GET_SIZE(prev) == 3) {
                q0 = plan_array(PyTuple_GET_ITEM(prev, 0), 1, NPY_INT64);
                r0 = plan_array(PyTuple_GET_ITEM(prev, 1), 2, NPY_DOUBLE);
                l0 = plan_array(PyTuple_GET_ITEM(prev, 2), 2, NPY_DOUBLE);
            }
            if (!q0 || !r0 || !l0 || PyArray_DIM(r0, 0) != PyArray_DIM(q0, 0) || PyArray_DIM(r0, 1) != 7
                || PyArray_DIM(l0, 0) != PyArray_DIM(q0, 0) || PyArray_DIM(l0, 1) != 3) q0 = NULL;   /* (warm's) */
        }
        if (!every || PyArray_DIM(every, 0) != K || (radius == -1.0 && PyErr_Occurred())
            || (prev && prev != Py_None && !matcher)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "scene_step: the chain does not fit");
            return NULL;
        }
    }
    PyObject *found;
    if (pre) {                                               /* the candidates found by the caller */
        Py_ssize_t npre = PyTuple_Check(pre) ? PyTuple_GET_SIZE(pre) : 0;
        if (npre == 3) {                                     /* (or by its stages, run here) */
            int ran = run_stages(PyTuple_GET_ITEM(pre, 2), args[1], args[2]);
            if (ran < 0) return NULL;
            if (!ran) Py_RETURN_NONE;
        }
        PyArrayObject *pc = npre == 2 || npre == 3 ? plan_array(PyTuple_GET_ITEM(pre, 0), 2, NPY_DOUBLE) : NULL;
        PyArrayObject *pw = pc ? plan_array(PyTuple_GET_ITEM(pre, 1), 1, NPY_DOUBLE) : NULL;
        if (!pw || PyArray_DIM(pc, 0) != K || PyArray_DIM(pc, 1) != 11 || PyArray_DIM(pw, 0) != K) {
            PyErr_SetString(PyExc_TypeError, "scene_step: the candidates found do not fit the plan");
            return NULL;
        }
        found = Py_NewRef(pre);
    } else {
        PyObject *in[6] = {args[1], args[2], P[1], P[2], P[3], NULL};
        found = Kernel_run(collide, in, NULL);
        if (!found) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    const double *c = PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(found, 0));
    const double *within = PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(found, 1));
    /* the candidates within their cutoff, in order; each key's in its per-body slots in order */
    int64_t nxt[SD_MAXKEYS], sel[SD_MAXCONTACTS], slot[SD_MAXCONTACTS];
    memcpy(nxt, f0, nk * sizeof *nxt);
    npy_intp nc = 0;
    unsigned char *drop;                                     /* (NULL where all are kept: the usual case) */
    if (capacity_drop(K, c, within, capacity, margin, patch, &drop) < 0) { Py_DECREF(found); return NULL; }
    for (npy_intp j = 0; j < K; j++) {
        if (!(c[11 * j] < within[j]) || (drop && drop[j])) continue;
        /* (a key past its per-body slots: data slots hold it, unless its layout is returned) */
        if (nc >= capacity || (nxt[key[j]] >= f1[key[j]] && (mode == 0 || layout_out))) {
            free(drop); Py_DECREF(found); Py_RETURN_NONE;
        }
        sel[nc] = j;
        slot[nc++] = nxt[key[j]]++;
    }
    free(drop);
    if (nc > ns) {                                           /* (a trajectory's step in data slots: how many) */
        Py_DECREF(found);
        if (chain && mode == 1) return PyLong_FromSsize_t(nc);
        Py_RETURN_NONE;
    }
    PyObject *data = PyArray_NewCopy(base, NPY_CORDER), *warm = NULL;
    npy_intp wdims[2] = {ns, 3};
    if (data) warm = PyArray_ZEROS(2, wdims, NPY_DOUBLE, 0);
    if (!warm) { Py_XDECREF(data); Py_DECREF(found); return NULL; }
    double *out = PyArray_DATA((PyArrayObject *)data), *w = PyArray_DATA((PyArrayObject *)warm);
    const double *m = PyArray_DATA(mu);
    for (npy_intp i = 0; i < nc; i++) {
        const double *r = c + 11 * sel[i];                   /* [d, x (3), n (3), w_a in a's body (3), n . w_b] */
        if (mode == 0) {                                     /* [mu, p (3, the body's axes), n (3), offset] */
            double *s = out + 8 * slot[i];
            s[0] = m[sel[i]];
            s[1] = r[7], s[2] = r[8], s[3] = r[9];
            s[4] = r[4], s[5] = r[5], s[6] = r[6];
            s[7] = r[10];
        } else {                                             /* [mu, w_a = x + d n / 2 (world), n (3), offset, W] */
            double *s = out + width * i;
            s[0] = m[sel[i]];
            for (int k = 0; k < 3; k++) {
                double t = r[0] * r[4 + k];
                t *= 0.5;
                s[1 + k] = r[1 + k] + t;
                s[4 + k] = r[4 + k];
            }
            s[7] = r[10];
            memcpy(s + 8, (const double *)PyArray_DATA(W) + (width - 8) * key[sel[i]], (width - 8) * sizeof(double));
        }
    }
    PyObject *cpair = NULL, *crows = NULL;
    int matched = 0;
    if (chain) {                                             /* the contacts' pairs and rows */
        npy_intp d1[1] = {nc}, d2[2] = {nc, 7};
        cpair = PyArray_SimpleNew(1, d1, NPY_INT64);
        crows = cpair ? PyArray_SimpleNew(2, d2, NPY_DOUBLE) : NULL;
        if (!crows) { Py_XDECREF(cpair); Py_DECREF(warm); Py_DECREF(data); Py_DECREF(found); return NULL; }
        int64_t *pp = PyArray_DATA((PyArrayObject *)cpair);
        double *rr = PyArray_DATA((PyArrayObject *)crows);
        const int64_t *ev = PyArray_DATA(every);
        for (npy_intp i = 0; i < nc; i++) {
            const double *r = c + 11 * sel[i];
            double *x = rr + 7 * i;
            pp[i] = ev[sel[i]];
            x[0] = r[7], x[1] = r[8], x[2] = r[9], x[3] = r[4], x[4] = r[5], x[5] = r[6], x[6] = r[10];
        }
        if (q0) {
            const int64_t *p0 = PyArray_DATA(q0), *at = mode == 0 ? slot : NULL;
            const double *x0 = PyArray_DATA(r0), *i0 = PyArray_DATA(l0);
            matched = match_plain(p0, x0, i0, PyArray_DIM(q0, 0), pp, rr, nc, radius, w, at);
            if (matched < 0) matched = match_general(p0, x0, i0, PyArray_DIM(q0, 0), pp, rr, nc, radius, w, at);
        }
    }
    if (matcher && !matched) {                               /* the warm start of these contacts */
        npy_intp dims[1] = {nc};
        PyObject *a = PyArray_SimpleNew(1, dims, NPY_INT64), *b = a ? PyArray_SimpleNew(1, dims, NPY_INT64) : NULL;
        if (b) {
            memcpy(PyArray_DATA((PyArrayObject *)a), sel, nc * sizeof *sel);
            memcpy(PyArray_DATA((PyArrayObject *)b), slot, nc * sizeof *slot);
            PyObject *call[5] = {a, b, PyTuple_GET_ITEM(found, 0), data, chain ? PyTuple_GET_ITEM(chain, 2) : NULL};
            answer = PyObject_Vectorcall(matcher, call, chain && PyTuple_GET_ITEM(chain, 2) != Py_None ? 5 : 4, NULL);
        }
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (!answer || (answer != Py_None && !(given = plan_array(answer, 2, NPY_DOUBLE)))) {
            Py_XDECREF(answer); Py_DECREF(found); Py_DECREF(warm); Py_DECREF(data); Py_XDECREF(cpair); Py_XDECREF(crows);
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
    }
    PyObject *cand = layout_out ? Py_NewRef(PyTuple_GET_ITEM(found, 0)) : NULL;
    Py_DECREF(found);
    /* a warm start of the contacts' shape, finite (else the Python road says what is wrong) */
    const double *w0 = given && PyArray_DIM(given, 0) == nc && PyArray_DIM(given, 1) == 3 ? PyArray_DATA(given) : NULL;
    if ((w0 && !all_finite(w0, 3 * nc)) || (matched && !all_finite(w, 3 * ns))) {
        Py_XDECREF(answer); Py_DECREF(warm); Py_DECREF(data); Py_XDECREF(cpair); Py_XDECREF(crows); Py_XDECREF(cand);
        Py_RETURN_NONE;
    }
    for (npy_intp i = 0; w0 && i < nc; i++) memcpy(w + 3 * (mode == 0 ? slot[i] : i), w0 + 3 * i, 3 * sizeof(double));
    Py_XDECREF(answer);
    PyObject *sin[6] = {args[1], args[2], args[3], args[4], warm, data};
    PyObject *step = Kernel_run(solve, sin, NULL);
    Py_DECREF(warm);
    if (!layout_out) Py_DECREF(data);
    if (!step) {
        Py_XDECREF(cpair); Py_XDECREF(crows);
        if (layout_out) { Py_DECREF(data); Py_DECREF(cand); }
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    /* each contact's slot: none where they fill every slot in order */
    int order = nc == ns;
    for (npy_intp i = 0; order && i < nc; i++) order = (mode == 0 ? slot[i] : i) == i;
    PyObject *index = Py_None;
    if (order) Py_INCREF(index);
    else {
        npy_intp dims[1] = {nc};
        index = PyArray_SimpleNew(1, dims, NPY_INT64);
        if (!index) {
            Py_DECREF(step); Py_XDECREF(cpair); Py_XDECREF(crows);
            if (layout_out) { Py_DECREF(data); Py_DECREF(cand); }
            return NULL;
        }
        int64_t *x = PyArray_DATA((PyArrayObject *)index);
        for (npy_intp i = 0; i < nc; i++) x[i] = mode == 0 ? slot[i] : i;
    }
    if (layout_out) {                                        /* the layout beside the answer */
        npy_intp dims[1] = {nc};
        PyObject *a = PyArray_SimpleNew(1, dims, NPY_INT64), *b = a ? PyArray_SimpleNew(1, dims, NPY_INT64) : NULL;
        PyObject *r = NULL;
        if (b) {
            memcpy(PyArray_DATA((PyArrayObject *)a), sel, nc * sizeof *sel);
            memcpy(PyArray_DATA((PyArrayObject *)b), slot, nc * sizeof *slot);
            r = PyTuple_Pack(6, step, index, a, b, cand, data);
        }
        Py_XDECREF(a); Py_XDECREF(b);
        Py_DECREF(step); Py_DECREF(index); Py_DECREF(cand); Py_DECREF(data);
        return r;
    }
    PyObject *imp = NULL;                                    /* (chain) the impulses in the contacts' order */
    if (chain) {
        PyObject *li = PyTuple_GET_ITEM(step, 2);
        imp = index == Py_None ? Py_NewRef(li) : PyArray_TakeFrom((PyArrayObject *)li, index, 0, NULL, NPY_RAISE);
    }
    PyObject *r = !chain ? PyTuple_Pack(2, step, index) : imp ? PyTuple_Pack(5, step, index, cpair, crows, imp) : NULL;
    Py_DECREF(step);
    Py_DECREF(index);
    Py_XDECREF(cpair);
    Py_XDECREF(crows);
    Py_XDECREF(imp);
    return r;
}

/* scene_rollout(plan, q, v, tau, settings, warm, chain, steps, matcher): up to ``steps`` steps of
   scene_step (``chain`` form), each from the state the one before reached, its warm start matched
   from the one before's contacts (``matcher``: scene_step's callable, asked where the matching is not
   plain, called with the step before's ``(pair, rows, impulses)`` as a fifth argument); ``tau`` (nv,)
   held, or (n, nv): row k the joint forces of step k; ``warm``: the first step's warm start (None
   or impulses, as scene_step's) where ``chain``'s previous is None.  Returns the list of the steps'
   scene_step answers ``(the step's arrays, index, pair, rows, impulses)``, ending before the first
   step this road declines (fewer than ``steps``: the caller takes the Python road for that one), or
   with that step's number of contacts (an int) where they are more than the plan's data slots.
   ``into`` (a 10th argument, optional): ``(Q (>= steps + 1, nq), V (>= steps + 1, nv), R (>= steps,
   8))`` float64 C-contiguous writeable arrays, into whose rows k + 1, k + 1, k step k's next ``q``,
   next ``v`` and report are copied (a caller that stacks them needs no list of arrays).  ``springs``
   (an 11th, optional): ``(D (nv,), iq (k,), iv (k,), K (k,), qs (k,))``, the joints' dampers and the
   sprung dofs of vector joints (int64 indices into q and v, stiffness, rest position): each step's
   joint forces are then ``tau`` plus ``-D v - K (q[iq] - qs)`` at the state it starts from, in the
   order of the NumPy road's ``tau + passive_forces(q, v)`` (so equal to it bit for bit).  ``candidates``
   (a 12th, optional): a callable ``(q, v)`` returning each step's candidates as scene_step's ``found``
   (a plan whose candidates are found before the call: robot meshes on planes, pairs of two boxes), or
   None where it declines that step (the chain then ends before it). */
static PyArrayObject *rows_into(PyObject *o, npy_intp n) {
    if (!PyArray_Check(o)) return NULL;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != NPY_DOUBLE || !PyArray_ISCARRAY(a) || !PyArray_ISNOTSWAPPED(a) || PyArray_NDIM(a) != 2
        || PyArray_DIM(a, 0) < n)
        return NULL;
    return a;
}

/* Row ``k`` of ``into`` (rows_into's) set to the float64 array ``x`` of as many entries as a row; 0 where
   they differ. */
static int put_row(PyArrayObject *into, npy_intp k, PyObject *x) {
    npy_intp w = PyArray_DIM(into, 1);
    if (!PyArray_Check(x) || PyArray_TYPE((PyArrayObject *)x) != NPY_DOUBLE || !PyArray_ISCARRAY_RO((PyArrayObject *)x)
        || PyArray_SIZE((PyArrayObject *)x) != w)
        return 0;
    memcpy((double *)PyArray_DATA(into) + w * k, PyArray_DATA((PyArrayObject *)x), w * sizeof(double));
    return 1;
}

/* The float64 (int64: ``integer``) C-contiguous 1-D array ``o`` of ``n`` entries (n < 0: any), else NULL. */
static PyArrayObject *flat_array(PyObject *o, npy_intp n, int integer) {
    if (!PyArray_Check(o)) return NULL;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != (integer ? NPY_INT64 : NPY_DOUBLE) || !PyArray_ISCARRAY_RO(a) || !PyArray_ISNOTSWAPPED(a)
        || PyArray_NDIM(a) != 1 || (n >= 0 && PyArray_DIM(a, 0) != n))
        return NULL;
    return a;
}

/* ``tau`` plus the springs' and dampers' forces at ``(q, v)`` (scene_rollout's ``springs``, checked): a
   new float64 array, NULL on an error (a TypeError where ``tau``, ``q`` or ``v`` are not such arrays). */
static PyObject *with_springs(PyObject *tau, PyObject *q, PyObject *v, PyArrayObject *const *sp) {
    npy_intp nv = PyArray_DIM(sp[0], 0), k = PyArray_DIM(sp[1], 0);
    PyArrayObject *t = flat_array(tau, nv, 0), *vv = flat_array(v, nv, 0), *qq = flat_array(q, -1, 0);
    if (!t || !vv || !qq) {
        PyErr_SetString(PyExc_TypeError, "scene_rollout: springs need tau, q and v as float64 C arrays");
        return NULL;
    }
    PyObject *out = PyArray_SimpleNew(1, &nv, NPY_DOUBLE);
    if (!out) return NULL;
    double *o = (double *)PyArray_DATA((PyArrayObject *)out);
    const double *d = (const double *)PyArray_DATA(sp[0]), *kk = (const double *)PyArray_DATA(sp[3]);
    const double *qs = (const double *)PyArray_DATA(sp[4]), *x = (const double *)PyArray_DATA(qq);
    const double *u = (const double *)PyArray_DATA(vv), *f = (const double *)PyArray_DATA(t);
    const long long *iq = (const long long *)PyArray_DATA(sp[1]), *iv = (const long long *)PyArray_DATA(sp[2]);
    npy_intp nq = PyArray_DIM(qq, 0);
    for (npy_intp i = 0; i < nv; i++) o[i] = (-d[i]) * u[i];
    for (npy_intp j = 0; j < k; j++) {
        if (iq[j] < 0 || iq[j] >= nq || iv[j] < 0 || iv[j] >= nv) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_ValueError, "scene_rollout: a spring's index is outside q or v");
            return NULL;
        }
        o[iv[j]] = o[iv[j]] - kk[j] * (x[iq[j]] - qs[j]);
    }
    for (npy_intp i = 0; i < nv; i++) o[i] = f[i] + o[i];
    return out;
}

static PyObject *scene_rollout(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *candidates = nargs == 12 && args[11] != Py_None ? args[11] : NULL;
    if (nargs < 9 || nargs > 12 || !PyTuple_Check(args[6]) || PyTuple_GET_SIZE(args[6]) != 3
        || !PyArray_Check(args[3]) || (candidates && !PyCallable_Check(candidates))) {
        PyErr_SetString(PyExc_TypeError, "scene_rollout(plan, q, v, tau, settings, warm, chain, steps, matcher[, into"
                        "[, springs[, candidates]]])");
        return NULL;
    }
    PyArrayObject *sp[5] = {NULL, NULL, NULL, NULL, NULL};
    if (nargs >= 11 && args[10] != Py_None) {
        PyObject *t = args[10];
        int ok = PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 5 && (sp[0] = flat_array(PyTuple_GET_ITEM(t, 0), -1, 0));
        npy_intp k = ok && (sp[1] = flat_array(PyTuple_GET_ITEM(t, 1), -1, 1)) ? PyArray_DIM(sp[1], 0) : -1;
        if (k < 0 || !(sp[2] = flat_array(PyTuple_GET_ITEM(t, 2), k, 1))
            || !(sp[3] = flat_array(PyTuple_GET_ITEM(t, 3), k, 0)) || !(sp[4] = flat_array(PyTuple_GET_ITEM(t, 4), k, 0))) {
            PyErr_SetString(PyExc_TypeError, "scene_rollout: springs must be (D (nv,), iq (k,), iv (k,), K (k,), "
                            "qs (k,)) float64 and int64 C arrays");
            return NULL;
        }
    }
    Py_ssize_t steps = PyLong_AsSsize_t(args[7]);
    if (steps == -1 && PyErr_Occurred()) return NULL;
    int rows = PyArray_NDIM((PyArrayObject *)args[3]) == 2;
    if (rows && PyArray_DIM((PyArrayObject *)args[3], 0) < steps) steps = PyArray_DIM((PyArrayObject *)args[3], 0);
    PyArrayObject *iq = NULL, *iv = NULL, *ir = NULL;
    if (nargs >= 10 && args[9] != Py_None) {
        PyObject *t = args[9];
        if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 3) {
            iq = rows_into(PyTuple_GET_ITEM(t, 0), steps + 1);
            iv = rows_into(PyTuple_GET_ITEM(t, 1), steps + 1);
            ir = rows_into(PyTuple_GET_ITEM(t, 2), steps);
        }
        if (!iq || !iv || !ir || PyArray_DIM(ir, 1) != 8) {
            PyErr_SetString(PyExc_TypeError, "scene_rollout: into must be three float64 C arrays (steps + 1, nq), "
                            "(steps + 1, nv), (steps, 8)");
            return NULL;
        }
    }
    PyObject *every = PyTuple_GET_ITEM(args[6], 0), *radius = PyTuple_GET_ITEM(args[6], 1);
    PyObject *prev = Py_NewRef(PyTuple_GET_ITEM(args[6], 2)), *q = Py_NewRef(args[1]), *v = Py_NewRef(args[2]);
    PyObject *out = PyList_New(0);
    for (Py_ssize_t k = 0; out && k < steps; k++) {
        PyObject *tau = rows ? PySequence_GetItem(args[3], k) : Py_NewRef(args[3]);
        if (tau && sp[0]) Py_SETREF(tau, with_springs(tau, q, v, sp));
        PyObject *found = !tau ? NULL : candidates ? PyObject_CallFunctionObjArgs(candidates, q, v, NULL)
                                                   : Py_NewRef(Py_None);
        if (found == Py_None && candidates) {                /* (declined: the caller's road for this step) */
            Py_DECREF(found);
            Py_DECREF(tau);
            break;
        }
        PyObject *chain = found ? PyTuple_Pack(3, every, radius, prev) : NULL;
        PyObject *r = NULL;
        if (chain) {
            PyObject *a[8] = {args[0], q, v, tau, args[4], prev == Py_None ? args[5] : args[8], found, chain};
            r = scene_step(mod, a, 8);
        }
        Py_XDECREF(tau);
        Py_XDECREF(found);
        Py_XDECREF(chain);
        if (!r) { Py_CLEAR(out); break; }
        if (r == Py_None) { Py_DECREF(r); break; }
        if (PyLong_Check(r)) {                               /* (more contacts than the data slots) */
            if (PyList_Append(out, r) < 0) Py_CLEAR(out);
            Py_DECREF(r);
            break;
        }
        PyObject *step = PyTuple_GET_ITEM(r, 0);
        if (iq && !(put_row(iq, k + 1, PyTuple_GET_ITEM(step, 0)) && put_row(iv, k + 1, PyTuple_GET_ITEM(step, 1))
                    && put_row(ir, k, PyTuple_GET_ITEM(step, 4)))) {
            PyErr_SetString(PyExc_TypeError, "scene_rollout: a step's arrays do not fit into's rows");
            Py_DECREF(r);
            Py_CLEAR(out);
            break;
        }
        Py_SETREF(q, Py_NewRef(PyTuple_GET_ITEM(step, 0)));
        Py_SETREF(v, Py_NewRef(PyTuple_GET_ITEM(step, 1)));
        PyObject *next = PyTuple_Pack(3, PyTuple_GET_ITEM(r, 2), PyTuple_GET_ITEM(r, 3), PyTuple_GET_ITEM(r, 4));
        if (!next || PyList_Append(out, r) < 0) { Py_XDECREF(next); Py_DECREF(r); Py_CLEAR(out); break; }
        Py_SETREF(prev, next);
        Py_DECREF(r);
    }
    Py_DECREF(prev);
    Py_DECREF(q);
    Py_DECREF(v);
    return out;
}

/* A view of ``n`` rows of ``base`` (its data from ``at``; ``ndim`` 1 or 2: ``width`` columns), float64
   with row stride ``stride`` bytes; NULL on an error. */
static PyObject *rows_view(PyObject *base, char *at, npy_intp n, int ndim, npy_intp width, npy_intp stride) {
    npy_intp dims[2] = {n, width}, strides[2] = {stride, sizeof(double)};
    Py_INCREF(f64);
    PyObject *v = PyArray_NewFromDescr(&PyArray_Type, f64, ndim, dims, strides, at, NPY_ARRAY_WRITEABLE, NULL);
    if (!v) return NULL;
    Py_INCREF(base);
    if (PyArray_SetBaseObject((PyArrayObject *)v, base) < 0) { Py_DECREF(v); return NULL; }
    return v;
}

/* pick(rows, cutoff, order, every): collide's hits among ``rows`` (K, C) float64, C-contiguous, C >= 7
   ([d, x (3), n (3), ...]): the rows with d < ``cutoff`` (a number), taken in ``order`` (K,) int64 (a
   permutation; None: as they are).  Returns ``(points (n, 3), normals (n, 3), distances (n,), sel (n,)
   int64, pair (n,) int64)``, the first three views of one new (n, 7) array of those rows' first
   columns, ``sel`` their indices in ``rows``, ``pair`` their entries of ``every`` (K,) int64 (each row's
   pair; None: ``pair`` None); None where the arguments do not fit (the caller then picks them itself). */
static PyObject *pick(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "pick(rows, cutoff, order, every)");
        return NULL;
    }
    PyArrayObject *c = plan_array(args[0], 2, NPY_DOUBLE);
    PyArrayObject *o = args[2] == Py_None ? NULL : plan_array(args[2], 1, NPY_INT64);
    PyArrayObject *e = args[3] == Py_None ? NULL : plan_array(args[3], 1, NPY_INT64);
    double cut = PyFloat_AsDouble(args[1]);
    if (cut == -1.0 && PyErr_Occurred()) return NULL;
    if (!c || PyArray_DIM(c, 1) < 7 || (args[2] != Py_None && (!o || PyArray_DIM(o, 0) != PyArray_DIM(c, 0)))
        || (args[3] != Py_None && (!e || PyArray_DIM(e, 0) != PyArray_DIM(c, 0))))
        Py_RETURN_NONE;
    npy_intp K = PyArray_DIM(c, 0), C = PyArray_DIM(c, 1), n = 0;
    const double *x = PyArray_DATA(c);
    const int64_t *ord = o ? PyArray_DATA(o) : NULL;
    for (npy_intp j = 0; j < K; j++) {
        int64_t r = ord ? ord[j] : j;
        if (r < 0 || r >= K) Py_RETURN_NONE;
        n += x[C * r] < cut;
    }
    npy_intp dims[2] = {n, 7};
    PyObject *H = PyArray_SimpleNew(2, dims, NPY_DOUBLE), *S = H ? PyArray_SimpleNew(1, dims, NPY_INT64) : NULL;
    PyObject *E = !S ? NULL : e ? PyArray_SimpleNew(1, dims, NPY_INT64) : Py_NewRef(Py_None);
    if (!E) { Py_XDECREF(H); Py_XDECREF(S); return NULL; }
    double *h = PyArray_DATA((PyArrayObject *)H);
    int64_t *s = PyArray_DATA((PyArrayObject *)S), *k = e ? PyArray_DATA((PyArrayObject *)E) : NULL;
    const int64_t *every = e ? PyArray_DATA(e) : NULL;
    for (npy_intp j = 0, m = 0; j < K; j++) {
        int64_t r = ord ? ord[j] : j;
        if (!(x[C * r] < cut)) continue;
        memcpy(h + 7 * m, x + C * r, 7 * sizeof(double));
        if (k) k[m] = every[r];
        s[m++] = r;
    }
    char *at = (char *)h;
    PyObject *points = rows_view(H, at + sizeof(double), n, 2, 3, 7 * sizeof(double));
    PyObject *normals = points ? rows_view(H, at + 4 * sizeof(double), n, 2, 3, 7 * sizeof(double)) : NULL;
    PyObject *dist = normals ? rows_view(H, at, n, 1, 1, 7 * sizeof(double)) : NULL;
    Py_DECREF(H);
    if (!dist) { Py_XDECREF(points); Py_XDECREF(normals); Py_DECREF(S); Py_DECREF(E); return NULL; }
    PyObject *t = PyTuple_New(5);
    if (!t) { Py_DECREF(points); Py_DECREF(normals); Py_DECREF(dist); Py_DECREF(S); Py_DECREF(E); return NULL; }
    PyTuple_SET_ITEM(t, 0, points);
    PyTuple_SET_ITEM(t, 1, normals);
    PyTuple_SET_ITEM(t, 2, dist);
    PyTuple_SET_ITEM(t, 3, S);
    PyTuple_SET_ITEM(t, 4, E);
    return t;
}

#include "found_batch.c"   /* (pasted in here by fastcall.py: a batch's candidates by a step's stages) */

static PyMethodDef functions[] = {
    {"scene_step", (PyCFunction)(void (*)(void))scene_step, METH_FASTCALL,
     "A step in a scene: collision kernel, slot layout and solve in one call (or None)."},
    {"scene_rollout", (PyCFunction)(void (*)(void))scene_rollout, METH_FASTCALL,
     "A trajectory's steps in a scene, one scene_step after another (until one declines)."},
    {"pick", (PyCFunction)(void (*)(void))pick, METH_FASTCALL,
     "collide's hits among a table of rows: those below a cutoff, in an order (or None)."},
    {"found_batch", (PyCFunction)(void (*)(void))found_batch, METH_FASTCALL,
     "A batch's candidates, each state's by a single step's stages (or False, None)."},
    {"front", front, METH_VARARGS, "Set (or take away) the direct road of a public function."},
    {NULL}
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, functions};

PyMODINIT_FUNC PyInit_MODNAME(void) {
    import_array();
    f64 = PyArray_DescrFromType(NPY_DOUBLE);
    if (!f64) return NULL;
    if (PyType_Ready(&KernelType) < 0 || PyType_Ready(&MethodType) < 0 || PyType_Ready(&FrontType) < 0) return NULL;
    front_key = PyUnicode_InternFromString("__sparsedyn_front__");
    if (!front_key) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    Py_INCREF(&KernelType);
    if (PyModule_AddObject(m, "Kernel", (PyObject *)&KernelType) < 0) { Py_DECREF(&KernelType); Py_DECREF(m); return NULL; }
    Py_INCREF(&MethodType);
    if (PyModule_AddObject(m, "Method", (PyObject *)&MethodType) < 0) { Py_DECREF(&MethodType); Py_DECREF(m); return NULL; }
    return m;
}
