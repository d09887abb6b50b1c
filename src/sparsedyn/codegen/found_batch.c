/* A batch of states' candidates found by a single step's stages (fastcall.c: run_stages), one call for
   the batch: what scene_batch asks where each state's candidates come from routines of its own (robot
   meshes on planes, pairs of two boxes) that a single step runs inside its native call. */

/* found_batch(found, Q, V, C, W, D): ``found`` ``(rows (K, w), within (K,), stages)``, scene_step's 7th
   argument (this thread's buffers, which the stages fill), run at each state b of ``Q`` (B, nq) and ``V``
   (B, nv), its rows and within then copied into ``C[b]`` (C: (B, K, w)) and ``W[b]`` (W: (B, K)), and its
   rows' first column (the distances) into ``D[b]`` (D: (B, K)); all float64, C-contiguous, C, W and D
   writeable.  Returns True once every state ran, False where a stage
   declines at a state (its kernel's fast path or its routine: the caller then finds the candidates its
   own way), None where the arguments do not fit, NULL on an error. */
static PyObject *found_batch(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 3) {
        PyErr_SetString(PyExc_TypeError, "found_batch(found, Q, V, C, W, D)");
        return NULL;
    }
    PyObject *stages = PyTuple_GET_ITEM(args[0], 2);
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
    if (PyArray_DIM(V, 0) != B || PyArray_DIM(C, 0) != B || PyArray_DIM(C, 1) != K || PyArray_DIM(C, 2) != w
        || PyArray_DIM(W, 0) != B || PyArray_DIM(W, 1) != K || PyArray_DIM(within, 0) != K
        || PyArray_DIM(D, 0) != B || PyArray_DIM(D, 1) != K)
        Py_RETURN_NONE;
    const double *r = PyArray_DATA(rows), *u = PyArray_DATA(within);
    double *c = PyArray_DATA(C), *cut = PyArray_DATA(W), *d = PyArray_DATA(D);
    char *qs = PyArray_DATA(Q), *vs = PyArray_DATA(V);
    for (npy_intp b = 0; b < B; b++) {
        /* (state b's q and v: views of its rows, which the stages' kernels read as one state's arrays) */
        PyObject *q = rows_view(args[1], qs + b * nq * sizeof(double), nq, 1, 1, sizeof(double));
        PyObject *v = q ? rows_view(args[2], vs + b * nv * sizeof(double), nv, 1, 1, sizeof(double)) : NULL;
        if (!v) { Py_XDECREF(q); return NULL; }
        int ran = run_stages(stages, q, v);
        Py_DECREF(q);
        Py_DECREF(v);
        if (ran < 0) return NULL;
        if (!ran) Py_RETURN_FALSE;
        memcpy(c + b * K * w, r, K * w * sizeof(double));
        memcpy(cut + b * K, u, K * sizeof(double));
        for (npy_intp k = 0; k < K; k++) d[b * K + k] = r[k * w];
    }
    Py_RETURN_TRUE;
}
