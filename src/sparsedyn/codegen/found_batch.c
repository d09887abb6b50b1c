/* A batch of states' candidates found by a single step's stages (scene_step.c: run_stages), one call for a run
   of states: what scene_batch asks where each state's candidates come from routines of its own (robot meshes
   on planes, pairs of two boxes) that a single step runs inside its native call.  The stages are read once
   into plain pointers (found_plan), then run state by state without the GIL: threads of their own buffers
   run runs of states at once. */

#define SD_MAXSTAGES 16

/* One stage read: a kernel (k) on the data p, its inputs ``at`` 0 (the state's q), 1 (its v) or -1 (p's); a
   routine f(plan, buf); or a gather (order (n,) of rows (m, w) ``from`` into ``to``). */
typedef struct {
    const Kernel *k;
    void *p[SD_MAXARGS];
    signed char at[SD_MAXARGS];
    int (*f)(const long long *, double *);
    const long long *plan;
    double *buf;
    const int64_t *order;
    npy_intp n, m, w;
    const double *from;
    double *to;
} sd_found_stage;

/* Whether the array ``o`` shares memory with any of the ``n`` arrays ``others`` (NULL entries skipped). */
static int overlaps(PyArrayObject *o, PyArrayObject *const *others, int n) {
    const char *lo = PyArray_DATA(o), *hi = lo + PyArray_NBYTES(o);
    for (int j = 0; j < n; j++) {
        if (!others[j]) continue;
        const char *blo = PyArray_DATA(others[j]), *bhi = blo + PyArray_NBYTES(others[j]);
        if (lo < bhi && blo < hi) return 1;
    }
    return 0;
}

/* A kernel's stage ``(kernel, ins, out)`` read into ``st`` for states of nq and nv entries (the ints 0 and 1
   among ins: the state's q and v); 1, or 0 where it does not fit (as Kernel_run's fast path would decline: shapes,
   dtypes, outputs that share memory with an input, another output or the batch's arrays ``batch`` (2)). */
static int kernel_stage(const Kernel *k, PyObject *ins, PyObject *outs, npy_intp nq, npy_intp nv,
                        PyArrayObject *const *batch, sd_found_stage *st) {
    PyArrayObject *seen[2 * SD_MAXARGS + 2] = {batch[0], batch[1]};
    int ns = 2;
    if (!PyTuple_Check(ins) || PyTuple_GET_SIZE(ins) != k->nin || outs == Py_None) return 0;
    st->k = k;
    for (int j = 0; j < k->nin; j++) {
        PyObject *x = PyTuple_GET_ITEM(ins, j);
        if (PyLong_CheckExact(x)) {
            long which = PyLong_AsLong(x);
            if ((which != 0 && which != 1) || k->in_ndim[j] != 1 || k->in_shape[j][0] != (which ? nv : nq)) return 0;
            st->at[j] = (signed char)which;
        } else {
            if (!fits(x, k->in_ndim[j], k->in_shape[j], 0)) return 0;
            st->at[j] = -1;
            st->p[j] = PyArray_DATA((PyArrayObject *)x);
            seen[ns++] = (PyArrayObject *)x;
        }
    }
    if (k->nout == 1 ? !PyArray_Check(outs) : (!PyTuple_Check(outs) || PyTuple_GET_SIZE(outs) != k->nout)) return 0;
    for (int j = 0; j < k->nout; j++) {
        PyObject *o = k->nout == 1 ? outs : PyTuple_GET_ITEM(outs, j);
        if (!fits(o, k->out_ndim[j], k->out_shape[j], 1) || overlaps((PyArrayObject *)o, seen, ns)) return 0;
        st->p[k->nin + j] = PyArray_DATA((PyArrayObject *)o);
        seen[ns++] = (PyArrayObject *)o;
    }
    return 1;
}

/* ``stages`` (run_stages' tuple) read into ``st`` (at most SD_MAXSTAGES); the number read, 0 where one does not
   fit (no exception), -1 on an error.  ``batch``: the batch's Q and V, which no stage may write. */
static int found_plan(PyObject *stages, npy_intp nq, npy_intp nv, PyArrayObject *const *batch, sd_found_stage *st) {
    if (!PyTuple_Check(stages) || PyTuple_GET_SIZE(stages) > SD_MAXSTAGES) return 0;
    for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(stages); s++) {
        PyObject *t = PyTuple_GET_ITEM(stages, s);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) return 0;
        PyObject *a = PyTuple_GET_ITEM(t, 0), *b = PyTuple_GET_ITEM(t, 1), *c = PyTuple_GET_ITEM(t, 2);
        sd_found_stage *x = st + s;
        memset(x, 0, sizeof *x);
        if (Py_TYPE(a) == &KernelType) {
            if (!kernel_stage((const Kernel *)a, b, c, nq, nv, batch, x)) return 0;
        } else if (PyLong_CheckExact(a)) {
            PyArrayObject *p = plan_array(b, 1, NPY_INT64), *y = plan_array(c, 1, NPY_DOUBLE);
            x->f = (int (*)(const long long *, double *))PyLong_AsVoidPtr(a);
            if (!x->f) return PyErr_Occurred() ? -1 : 0;
            if (!p || !y || !PyArray_ISWRITEABLE(y) || overlaps(y, batch, 2)) return 0;
            x->plan = PyArray_DATA(p);
            x->buf = PyArray_DATA(y);
        } else if (PyArray_Check(a)) {
            PyArrayObject *o = plan_array(a, 1, NPY_INT64), *r = plan_array(b, 2, NPY_DOUBLE);
            PyArrayObject *y = plan_array(c, 2, NPY_DOUBLE);
            if (!o || !r || !y || !PyArray_ISWRITEABLE(y) || PyArray_DIM(o, 0) != PyArray_DIM(y, 0)
                || PyArray_DIM(r, 1) != PyArray_DIM(y, 1) || overlaps(y, &r, 1) || overlaps(y, batch, 2)) return 0;
            x->order = PyArray_DATA(o);
            x->n = PyArray_DIM(o, 0);
            x->m = PyArray_DIM(r, 0);
            x->w = PyArray_DIM(r, 1);
            for (npy_intp i = 0; i < x->n; i++)
                if (x->order[i] < 0 || x->order[i] >= x->m) return 0;
            x->from = PyArray_DATA(r);
            x->to = PyArray_DATA(y);
        } else return 0;
    }
    return (int)PyTuple_GET_SIZE(stages);
}

/* The ``n`` stages ``st`` at one state (q, v): 1 once all ran, 0 where a kernel's tests or a routine decline. */
static int found_run(const sd_found_stage *st, int n, const double *q, const double *v) {
    for (int s = 0; s < n; s++) {
        const sd_found_stage *x = st + s;
        if (x->k) {
            void *p[SD_MAXARGS];
            memcpy(p, x->p, sizeof p);
            for (int j = 0; j < x->k->nin; j++)
                if (x->at[j] >= 0) p[j] = (void *)(x->at[j] ? v : q);
            if (!kernel_go(x->k, p)) return 0;
        } else if (x->f) {
            if (x->f(x->plan, x->buf)) return 0;
        } else {
            for (npy_intp i = 0; i < x->n; i++)
                memcpy(x->to + x->w * i, x->from + x->w * x->order[i], x->w * sizeof(double));
        }
    }
    return 1;
}

/* found_batch(found, Q, V, C, W, D): ``found`` ``(rows (K, w), within (K,), stages)``, scene_step's 7th
   argument (this thread's buffers, which the stages fill), run at each state b of ``Q`` (B, nq) and ``V``
   (B, nv), its rows and within then copied into ``C[b]`` (C: (B, K, w)) and ``W[b]`` (W: (B, K)), and its
   rows' first column (the distances) into ``D[b]`` (D: (B, K)); all float64, C-contiguous, C, W and D
   writeable.  The states run without the GIL (another thread, with buffers of its own, may run other states
   at once).  Returns True once every state ran, False where a stage declines at a state (its kernel's tests
   or its routine: the caller then finds the candidates its own way), None where the arguments do not fit,
   NULL on an error. */
static PyObject *found_batch(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 3) {
        PyErr_SetString(PyExc_TypeError, "found_batch(found, Q, V, C, W, D)");
        return NULL;
    }
    PyArrayObject *rows = plan_array(PyTuple_GET_ITEM(args[0], 0), 2, NPY_DOUBLE);
    PyArrayObject *within = plan_array(PyTuple_GET_ITEM(args[0], 1), 1, NPY_DOUBLE);
    PyArrayObject *Q = plan_array(args[1], 2, NPY_DOUBLE), *V = plan_array(args[2], 2, NPY_DOUBLE);
    PyArrayObject *C = plan_array(args[3], 3, NPY_DOUBLE), *W = plan_array(args[4], 2, NPY_DOUBLE);
    PyArrayObject *D = plan_array(args[5], 2, NPY_DOUBLE);
    if (!rows || !within || !Q || !V || !C || !W || !D || !PyArray_ISWRITEABLE(C) || !PyArray_ISWRITEABLE(W)
        || !PyArray_ISWRITEABLE(D))
        Py_RETURN_NONE;
    npy_intp B = PyArray_DIM(Q, 0), K = PyArray_DIM(rows, 0), w = PyArray_DIM(rows, 1);
    npy_intp nq = PyArray_DIM(Q, 1), nv = PyArray_DIM(V, 1);
    PyArrayObject *outs[5] = {C, W, D, rows, within}, *batch[2] = {Q, V};
    if (PyArray_DIM(V, 0) != B || PyArray_DIM(C, 0) != B || PyArray_DIM(C, 1) != K || PyArray_DIM(C, 2) != w
        || PyArray_DIM(W, 0) != B || PyArray_DIM(W, 1) != K || PyArray_DIM(within, 0) != K
        || PyArray_DIM(D, 0) != B || PyArray_DIM(D, 1) != K || overlaps(C, outs + 1, 4) || overlaps(W, outs + 2, 3)
        || overlaps(D, outs + 3, 2) || overlaps(C, batch, 2) || overlaps(W, batch, 2) || overlaps(D, batch, 2))
        Py_RETURN_NONE;
    sd_found_stage st[SD_MAXSTAGES];
    int ns = found_plan(PyTuple_GET_ITEM(args[0], 2), nq, nv, batch, st);
    if (ns < 0) return NULL;
    if (ns == 0) Py_RETURN_NONE;
    const double *r = PyArray_DATA(rows), *u = PyArray_DATA(within), *qs = PyArray_DATA(Q), *vs = PyArray_DATA(V);
    double *c = PyArray_DATA(C), *cut = PyArray_DATA(W), *d = PyArray_DATA(D);
    int ran = 1;
    Py_BEGIN_ALLOW_THREADS
    for (npy_intp b = 0; b < B; b++) {
        if (!(ran = found_run(st, ns, qs + b * nq, vs + b * nv))) break;
        memcpy(c + b * K * w, r, K * w * sizeof(double));
        memcpy(cut + b * K, u, K * sizeof(double));
        for (npy_intp k = 0; k < K; k++) d[b * K + k] = r[k * w];
    }
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(ran);
}
