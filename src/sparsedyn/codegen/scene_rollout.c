/* Part of the fast-call extension (fastcall.c includes it; fastcall.py pastes it in): a trajectory's steps
   in a scene, one scene_step after another, and collide's hits among a table of rows. */

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

/* scene_rollout's ``springs`` ``t`` (its 11th argument) in ``sp`` (its five arrays): 0, -1 with a TypeError
   where they do not fit. */
static int rollout_springs(PyObject *t, PyArrayObject **sp) {
    int ok = PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 5 && (sp[0] = flat_array(PyTuple_GET_ITEM(t, 0), -1, 0));
    npy_intp k = ok && (sp[1] = flat_array(PyTuple_GET_ITEM(t, 1), -1, 1)) ? PyArray_DIM(sp[1], 0) : -1;
    if (k < 0 || !(sp[2] = flat_array(PyTuple_GET_ITEM(t, 2), k, 1))
        || !(sp[3] = flat_array(PyTuple_GET_ITEM(t, 3), k, 0))
        || !(sp[4] = flat_array(PyTuple_GET_ITEM(t, 4), k, 0))) {
        PyErr_SetString(PyExc_TypeError, "scene_rollout: springs must be (D (nv,), iq (k,), iv (k,), K (k,), "
                        "qs (k,)) float64 and int64 C arrays");
        return -1;
    }
    return 0;
}

/* scene_rollout's ``into`` ``t`` (its 10th argument) for ``steps`` steps in ``into`` (its three arrays): 0,
   -1 with a TypeError where they do not fit. */
static int rollout_into(PyObject *t, Py_ssize_t steps, PyArrayObject **into) {
    if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 3) {
        into[0] = rows_into(PyTuple_GET_ITEM(t, 0), steps + 1);
        into[1] = rows_into(PyTuple_GET_ITEM(t, 1), steps + 1);
        into[2] = rows_into(PyTuple_GET_ITEM(t, 2), steps);
    }
    if (!into[0] || !into[1] || !into[2] || PyArray_DIM(into[2], 1) != 8) {
        PyErr_SetString(PyExc_TypeError, "scene_rollout: into must be three float64 C arrays (steps + 1, nq), "
                        "(steps + 1, nv), (steps, 8)");
        return -1;
    }
    return 0;
}

static PyObject *scene_rollout(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *candidates = nargs == 12 && args[11] != Py_None ? args[11] : NULL;
    if (nargs < 9 || nargs > 12 || !PyTuple_Check(args[6]) || PyTuple_GET_SIZE(args[6]) != 3
        || !PyArray_Check(args[3]) || (candidates && !PyCallable_Check(candidates))) {
        PyErr_SetString(PyExc_TypeError, "scene_rollout(plan, q, v, tau, settings, warm, chain, steps, matcher[, into"
                        "[, springs[, candidates]]])");
        return NULL;
    }
    PyArrayObject *sp[5] = {NULL, NULL, NULL, NULL, NULL}, *into[3] = {NULL, NULL, NULL};
    if (nargs >= 11 && args[10] != Py_None && rollout_springs(args[10], sp) < 0) return NULL;
    Py_ssize_t steps = PyLong_AsSsize_t(args[7]);
    if (steps == -1 && PyErr_Occurred()) return NULL;
    int rows = PyArray_NDIM((PyArrayObject *)args[3]) == 2;
    if (rows && PyArray_DIM((PyArrayObject *)args[3], 0) < steps) steps = PyArray_DIM((PyArrayObject *)args[3], 0);
    if (nargs >= 10 && args[9] != Py_None && rollout_into(args[9], steps, into) < 0) return NULL;
    PyArrayObject *iq = into[0], *iv = into[1], *ir = into[2];
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
