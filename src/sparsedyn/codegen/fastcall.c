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

/* (each pasted in here by fastcall.py: a public function's direct road, a step in a scene in one call, a
   trajectory's steps and collide's hits, a batch's candidates by a step's stages) */
#include "front.c"
#include "scene_step.c"
#include "scene_rollout.c"
#include "found_batch.c"

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
