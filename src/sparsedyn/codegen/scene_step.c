/* Part of the fast-call extension (fastcall.c includes it; fastcall.py pastes it in): a step in a scene in
   one native call, its pieces each a function of its own. */

/* scene_step(plan, q, v, tau, settings, warm): one time step in a scene whose pairs are all the collision
   kernel's, in one call: the collision kernel with its look-ahead (``collide``: q, v, shapes, reach,
   look -> candidates (K, 11), cutoffs (K,)), the candidates within their cutoff laid out in the
   step's slots, and the step's kernel (``solve``: q, v, tau, settings, warm start (ns, 3), slot data
   -> its arrays).  ``warm``: None, or impulses (m, 3) to start from (float64, C-contiguous), each
   contact's put in its slot where m is the number of contacts, else none (zeros), or a callable
   ``warm(sel, slot, candidates, data)`` called once the contacts are laid out (sel (nc,) int64: each
   contact's candidate, slot (nc,) int64: its per-body slot, the candidates (K, 11), the slot data)
   that returns such impulses (a trajectory's warm start, matched from the step before's contacts).
   ``plan``: (collide, shapes, reach, look, solve, kid (K,) int64: each
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
   ``shapes``, ``reach`` and ``look`` are then unused (None allowed).  ``chain`` (an 8th argument, optional;
   a trajectory's step):
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
   with no call back into Python; and with ``derive`` (a 9th argument, optional, beside ``chain`` True): ``(sel,
   slot, index, blocks, at, gravity, par)``, a layout met before (its ``sel``, ``slot`` and ``index`` as this
   call returns them) and the Kernel of its derivatives' blocks (``blocks(q, v, v_next, impulses, velocities,
   report, correction, at, data, gravity, par)``, fused_derivatives's): where the step's layout is that one
   and the kernel's fast path answers, the call returns ``(the step's arrays, index, the kernel's answer)``
   instead (a caller differentiating a trajectory's steps meets its layouts again). */
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
            PyArrayObject *o = plan_array(a, 1, NPY_INT64), *x = plan_array(b, 2, NPY_DOUBLE),
                          *y = plan_array(c, 2, NPY_DOUBLE);
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
   fewer: ``*out`` a new array of K flags (free it) where some are left out, else NULL (none allocated).
   Returns 0, -1 where memory fails (an exception set). */
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

/* scene_step's plan (its first argument, checked): the collision kernel (unread where the candidates are
   found before), the solve, each candidate's key (kid (K,)) and friction (mu (K,)), each key's per-body
   slots (first, end (nk,)), the slots' base data (ns, width), the keys' joint weights W (mode 1), the mode,
   the capacity, the margin and the patch depth. */
typedef struct {
    Kernel *collide, *solve;
    PyArrayObject *kid, *mu, *first, *end, *base, *W;
    long mode, capacity;
    double margin, patch;
    npy_intp K, nk, ns, width;
} StepPlan;

/* The plan tuple's entries ``P`` in ``sp`` (``pre``: the candidates come found): 1; 0 where its keys or its
   capacity are more than this road holds; -1 on an error (a TypeError where it does not fit, a ValueError
   where a key is out of range). */
static int step_plan(PyObject *const *P, int pre, StepPlan *sp) {
    Kernel *collide = (Kernel *)P[0], *solve = (Kernel *)P[4];
    if ((!pre && (Py_TYPE(P[0]) != &KernelType || collide->nin != 5 || collide->nout != 2
                  || collide->out_ndim[0] != 2 || collide->out_shape[0][1] != 11))
        || Py_TYPE(P[4]) != &KernelType || solve->nin != 6 || solve->in_ndim[4] != 2 || solve->in_ndim[5] != 2) {
        PyErr_SetString(PyExc_TypeError, "scene_step: the plan's kernels do not fit");
        return -1;
    }
    PyArrayObject *kid = plan_array(P[5], 1, NPY_INT64), *mu = plan_array(P[6], 1, NPY_DOUBLE),
                  *first = plan_array(P[7], 1, NPY_INT64), *end = plan_array(P[8], 1, NPY_INT64),
                  *base = plan_array(P[9], 2, NPY_DOUBLE),
                  *W = P[10] == Py_None ? NULL : plan_array(P[10], 2, NPY_DOUBLE);
    long mode = PyLong_AsLong(P[11]), capacity = PyLong_AsLong(P[12]);
    double margin = PyFloat_AsDouble(P[13]), patch = PyFloat_AsDouble(P[14]);
    if (PyErr_Occurred()) return -1;
    npy_intp K = kid ? PyArray_DIM(kid, 0) : 0, nk = first ? PyArray_DIM(first, 0) : 0;
    if (!pre && kid && collide->out_shape[0][0] != K) K = -1;        /* (refused below) */
    npy_intp ns = base ? PyArray_DIM(base, 0) : 0, width = base ? PyArray_DIM(base, 1) : 0;
    if (!kid || !mu || !first || !end || !base || PyArray_DIM(kid, 0) != K || PyArray_DIM(mu, 0) != K
        || PyArray_DIM(end, 0) != nk || (mode != 0 && mode != 1) || solve->in_shape[4][0] != ns
        || solve->in_shape[4][1] != 3 || solve->in_shape[5][0] != ns || solve->in_shape[5][1] != width
        || (mode == 0 ? width != 8 : (!W || PyArray_DIM(W, 0) != nk || width != 8 + PyArray_DIM(W, 1)))) {
        PyErr_SetString(PyExc_TypeError, "scene_step: the plan's arrays do not fit");
        return -1;
    }
    if (nk > SD_MAXKEYS || capacity > SD_MAXCONTACTS) return 0;     /* more than this road holds */
    const int64_t *key = PyArray_DATA(kid);
    for (npy_intp j = 0; j < K; j++)
        if (key[j] < 0 || key[j] >= nk) {
            PyErr_SetString(PyExc_ValueError, "scene_step: a key out of range");
            return -1;
        }
    *sp = (StepPlan){collide, solve, kid, mu, first, end, base, W, mode, capacity, margin, patch, K, nk, ns, width};
    return 1;
}

/* A trajectory's step (scene_step's ``chain``): each candidate's scene pair (every (K,)), the radius of the
   warm start's matching and the step before's contacts (pair q0 (np,), rows r0 (np, 7), impulses l0 (np,
   3); q0 NULL where there are none, or of other dtypes: the matcher's then). */
typedef struct {
    PyArrayObject *every, *q0, *r0, *l0;
    double radius;
} StepChain;

/* The chain ``chain`` in ``ch`` (``matcher``: whether scene_step has one, which a step before needs):
   0, -1 on an error (a TypeError where it does not fit). */
static int step_chain(PyObject *chain, int matcher, npy_intp K, StepChain *ch) {
    *ch = (StepChain){NULL, NULL, NULL, NULL, 0.0};
    PyObject *prev = PyTuple_Check(chain) && PyTuple_GET_SIZE(chain) == 3 ? PyTuple_GET_ITEM(chain, 2) : NULL;
    ch->every = prev ? plan_array(PyTuple_GET_ITEM(chain, 0), 1, NPY_INT64) : NULL;
    if (ch->every) ch->radius = PyFloat_AsDouble(PyTuple_GET_ITEM(chain, 1));
    if (ch->every && prev != Py_None) {
        if (PyTuple_Check(prev) && PyTuple_GET_SIZE(prev) == 3) {
            ch->q0 = plan_array(PyTuple_GET_ITEM(prev, 0), 1, NPY_INT64);
            ch->r0 = plan_array(PyTuple_GET_ITEM(prev, 1), 2, NPY_DOUBLE);
            ch->l0 = plan_array(PyTuple_GET_ITEM(prev, 2), 2, NPY_DOUBLE);
        }
        if (!ch->q0 || !ch->r0 || !ch->l0 || PyArray_DIM(ch->r0, 0) != PyArray_DIM(ch->q0, 0)
            || PyArray_DIM(ch->r0, 1) != 7 || PyArray_DIM(ch->l0, 0) != PyArray_DIM(ch->q0, 0)
            || PyArray_DIM(ch->l0, 1) != 3)
            ch->q0 = NULL;                                   /* (the matcher's) */
    }
    if (!ch->every || PyArray_DIM(ch->every, 0) != K || (ch->radius == -1.0 && PyErr_Occurred())
        || (prev && prev != Py_None && !matcher)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "scene_step: the chain does not fit");
        return -1;
    }
    return 0;
}

/* The step's candidates ``(rows (K, 11), cutoffs (K,))``: ``pre``'s (the caller's, its stages run here
   where it has them) or the plan's collision kernel's at ``q``, ``v``; a new reference, Py_None (a new
   reference) where a stage or the kernel's fast path declines, NULL on an error. */
static PyObject *step_found(PyObject *pre, const StepPlan *sp, PyObject *const *P, PyObject *q, PyObject *v) {
    if (!pre) {
        PyObject *in[6] = {q, v, P[1], P[2], P[3], NULL};
        PyObject *found = Kernel_run(sp->collide, in, NULL);
        return found || PyErr_Occurred() ? found : Py_NewRef(Py_None);
    }
    Py_ssize_t npre = PyTuple_Check(pre) ? PyTuple_GET_SIZE(pre) : 0;
    if (npre == 3) {                                         /* (its stages fill its buffers) */
        int ran = run_stages(PyTuple_GET_ITEM(pre, 2), q, v);
        if (ran <= 0) return ran < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyArrayObject *pc = npre == 2 || npre == 3 ? plan_array(PyTuple_GET_ITEM(pre, 0), 2, NPY_DOUBLE) : NULL;
    PyArrayObject *pw = pc ? plan_array(PyTuple_GET_ITEM(pre, 1), 1, NPY_DOUBLE) : NULL;
    if (!pw || PyArray_DIM(pc, 0) != sp->K || PyArray_DIM(pc, 1) != 11 || PyArray_DIM(pw, 0) != sp->K) {
        PyErr_SetString(PyExc_TypeError, "scene_step: the candidates found do not fit the plan");
        return NULL;
    }
    return Py_NewRef(pre);
}

/* The candidates ``c`` (K, 11) within their ``cutoffs`` (those capacity_drop keeps), in order: each one's
   index in ``sel`` and its key's next per-body slot in ``slot``.  Returns their count; -1 where this road
   declines (more than the capacity; a key past its per-body slots where the step runs in them or returns
   its layout: ``layout_out``), -2 on an error (memory). */
static npy_intp step_select(const StepPlan *sp, const double *c, const double *within, int layout_out,
                            int64_t *sel, int64_t *slot) {
    int64_t nxt[SD_MAXKEYS];
    const int64_t *key = PyArray_DATA(sp->kid), *f1 = PyArray_DATA(sp->end);
    memcpy(nxt, PyArray_DATA(sp->first), sp->nk * sizeof *nxt);
    unsigned char *drop;                                     /* (NULL where all are kept: the usual case) */
    if (capacity_drop(sp->K, c, within, sp->capacity, sp->margin, sp->patch, &drop) < 0) return -2;
    npy_intp nc = 0;
    for (npy_intp j = 0; j < sp->K; j++) {
        if (!(c[11 * j] < within[j]) || (drop && drop[j])) continue;
        /* (a key past its per-body slots: data slots hold it, unless its layout is returned) */
        if (nc >= sp->capacity || (nxt[key[j]] >= f1[key[j]] && (sp->mode == 0 || layout_out))) {
            nc = -1;
            break;
        }
        sel[nc] = j;
        slot[nc++] = nxt[key[j]]++;
    }
    free(drop);
    return nc;
}

/* The ``nc`` selected candidates' rows of ``c`` written into the slots' data ``out`` (a copy of the plan's
   base): per-body slots [mu, p (3, the body's axes), n (3), offset] in their slots, data slots [mu, w_a = x
   + d n / 2 (world), n (3), offset, W] in the first ones. */
static void step_rows(const StepPlan *sp, const double *c, const int64_t *sel, const int64_t *slot, npy_intp nc,
                      double *out) {
    const double *m = PyArray_DATA(sp->mu);
    const int64_t *key = PyArray_DATA(sp->kid);
    npy_intp width = sp->width;
    for (npy_intp i = 0; i < nc; i++) {
        const double *r = c + 11 * sel[i];                   /* [d, x (3), n (3), w_a in a's body (3), n . w_b] */
        if (sp->mode == 0) {
            double *s = out + 8 * slot[i];
            s[0] = m[sel[i]];
            s[1] = r[7], s[2] = r[8], s[3] = r[9];
            s[4] = r[4], s[5] = r[5], s[6] = r[6];
            s[7] = r[10];
        } else {
            double *s = out + width * i;
            s[0] = m[sel[i]];
            for (int k = 0; k < 3; k++) {
                double t = r[0] * r[4 + k];
                t *= 0.5;
                s[1 + k] = r[1 + k] + t;
                s[4 + k] = r[4 + k];
            }
            s[7] = r[10];
            const double *wk = (const double *)PyArray_DATA(sp->W) + (width - 8) * key[sel[i]];
            memcpy(s + 8, wk, (width - 8) * sizeof(double));
        }
    }
}

/* A trajectory's step: its contacts' scene pairs (nc,) int64 and rows (nc, 7) [w_a in a's body (3), n (3), n .
   w_b] as new arrays in ``*cpair``, ``*crows``, and the warm start ``w`` matched from the step before's
   contacts where the chain has them (warm_match.c).  Returns 1 where matched, 0 where not, -1 on an error. */
static int step_pairs(const StepChain *ch, const StepPlan *sp, const double *c, const int64_t *sel,
                      const int64_t *slot, npy_intp nc, double *w, PyObject **cpair, PyObject **crows) {
    npy_intp d1[1] = {nc}, d2[2] = {nc, 7};
    *cpair = PyArray_SimpleNew(1, d1, NPY_INT64);
    *crows = *cpair ? PyArray_SimpleNew(2, d2, NPY_DOUBLE) : NULL;
    if (!*crows) return -1;
    int64_t *pp = PyArray_DATA((PyArrayObject *)*cpair);
    double *rr = PyArray_DATA((PyArrayObject *)*crows);
    const int64_t *ev = PyArray_DATA(ch->every);
    for (npy_intp i = 0; i < nc; i++) {
        const double *r = c + 11 * sel[i];
        double *x = rr + 7 * i;
        pp[i] = ev[sel[i]];
        x[0] = r[7], x[1] = r[8], x[2] = r[9], x[3] = r[4], x[4] = r[5], x[5] = r[6], x[6] = r[10];
    }
    if (!ch->q0) return 0;
    const int64_t *p0 = PyArray_DATA(ch->q0), *at = sp->mode == 0 ? slot : NULL;
    const double *x0 = PyArray_DATA(ch->r0), *i0 = PyArray_DATA(ch->l0);
    int matched = match_plain(p0, x0, i0, PyArray_DIM(ch->q0, 0), pp, rr, nc, ch->radius, w, at);
    if (matched < 0) matched = match_general(p0, x0, i0, PyArray_DIM(ch->q0, 0), pp, rr, nc, ch->radius, w, at);
    return matched;
}

/* ``(sel, slot)`` of the ``nc`` contacts as a new tuple of two int64 arrays; NULL on an error. */
static PyObject *step_layout(const int64_t *sel, const int64_t *slot, npy_intp nc) {
    npy_intp dims[1] = {nc};
    PyObject *a = PyArray_SimpleNew(1, dims, NPY_INT64), *b = a ? PyArray_SimpleNew(1, dims, NPY_INT64) : NULL;
    PyObject *t = NULL;
    if (b) {
        memcpy(PyArray_DATA((PyArrayObject *)a), sel, nc * sizeof *sel);
        memcpy(PyArray_DATA((PyArrayObject *)b), slot, nc * sizeof *slot);
        t = PyTuple_Pack(2, a, b);
    }
    Py_XDECREF(a);
    Py_XDECREF(b);
    return t;
}

/* The warm start that the callable ``matcher`` answers for the contacts laid out (``layout``: step_layout's),
   the candidates' rows ``cand``, the slots' ``data`` and, in a trajectory's step with one before, that step's
   contacts ``prev``: a new reference, None where it has none; NULL on an error, or where the answer is
   not impulses (no error set: this road declines). */
static PyObject *step_asked(PyObject *matcher, PyObject *layout, PyObject *cand, PyObject *data, PyObject *prev) {
    PyObject *call[5] = {PyTuple_GET_ITEM(layout, 0), PyTuple_GET_ITEM(layout, 1), cand, data, prev};
    PyObject *answer = PyObject_Vectorcall(matcher, call, prev && prev != Py_None ? 5 : 4, NULL);
    if (answer && answer != Py_None && !plan_array(answer, 2, NPY_DOUBLE)) Py_CLEAR(answer);
    return answer;
}

/* Each contact's slot as an int64 array (nc,), None where they fill every slot in order: a new reference,
   NULL on an error. */
static PyObject *step_index(const StepPlan *sp, const int64_t *slot, npy_intp nc) {
    int order = nc == sp->ns;
    for (npy_intp i = 0; order && i < nc; i++) order = (sp->mode == 0 ? slot[i] : i) == i;
    if (order) return Py_NewRef(Py_None);
    npy_intp dims[1] = {nc};
    PyObject *index = PyArray_SimpleNew(1, dims, NPY_INT64);
    if (!index) return NULL;
    int64_t *x = PyArray_DATA((PyArrayObject *)index);
    for (npy_intp i = 0; i < nc; i++) x[i] = sp->mode == 0 ? slot[i] : i;
    return index;
}

/* What scene_step holds while it runs (new references or NULL), released at its end. */
typedef struct {
    PyObject *found, *data, *warm, *layout, *cpair, *crows, *answer, *step, *index, *imp;
} StepRefs;

static void step_release(StepRefs *r) {
    PyObject **all[] = {&r->found, &r->data, &r->warm, &r->layout, &r->cpair, &r->crows, &r->answer, &r->step,
                        &r->index, &r->imp};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) Py_CLEAR(*all[i]);
}

/* The slots' data and warm start (zeros) as new arrays in ``r``, the selected candidates written in the data
   (step_rows) and, in a chain, the contacts' pairs and rows and their matched warm start (step_pairs): 1
   where matched, 0 where not, -1 on an error. */
static int step_lay_out(const StepPlan *sp, const StepChain *ch, const double *c, const int64_t *sel,
                        const int64_t *slot, npy_intp nc, StepRefs *r) {
    npy_intp wdims[2] = {sp->ns, 3};
    r->data = PyArray_NewCopy(sp->base, NPY_CORDER);
    r->warm = r->data ? PyArray_ZEROS(2, wdims, NPY_DOUBLE, 0) : NULL;
    if (!r->warm) return -1;
    step_rows(sp, c, sel, slot, nc, PyArray_DATA((PyArrayObject *)r->data));
    if (!ch->every) return 0;
    return step_pairs(ch, sp, c, sel, slot, nc, PyArray_DATA((PyArrayObject *)r->warm), &r->cpair, &r->crows);
}

/* scene_step's answer once the solve ran (r->step, r->index made): the layout's tuple (``layout_out``: the
   contacts' ``sel``, ``slot`` of ``nc``), the trajectory's (``chain``), else ``(step, index)``; NULL on an
   error. */
static PyObject *step_answer(StepRefs *r, int layout_out, PyObject *chain, const int64_t *sel, const int64_t *slot,
                             npy_intp nc) {
    if (layout_out) {
        if (!r->layout && !(r->layout = step_layout(sel, slot, nc))) return NULL;
        return PyTuple_Pack(6, r->step, r->index, PyTuple_GET_ITEM(r->layout, 0), PyTuple_GET_ITEM(r->layout, 1),
                            PyTuple_GET_ITEM(r->found, 0), r->data);
    }
    if (!chain) return PyTuple_Pack(2, r->step, r->index);
    PyObject *li = PyTuple_GET_ITEM(r->step, 2);             /* the impulses in the contacts' order */
    r->imp = r->index == Py_None ? Py_NewRef(li) : PyArray_TakeFrom((PyArrayObject *)li, r->index, 0, NULL, NPY_RAISE);
    return r->imp ? PyTuple_Pack(5, r->step, r->index, r->cpair, r->crows, r->imp) : NULL;
}

/* The derivatives' blocks of the step in ``r`` by ``derive`` (scene_step's ninth argument: ``(sel, slot, index,
   blocks, at, gravity, par)``, a layout met before and its blocks' kernel) where the step's layout (``sel``,
   ``slot`` of ``nc`` contacts, r->index) is that one: a new reference to the kernel's answer, NULL where the
   layout differs or the kernel's fast path declines (no error set), or on an error. */
static PyObject *step_derived(PyObject *derive, StepRefs *r, const int64_t *sel, const int64_t *slot, npy_intp nc,
                              PyObject *const *args) {
    if (!PyTuple_Check(derive) || PyTuple_GET_SIZE(derive) != 7) {
        PyErr_SetString(PyExc_TypeError, "scene_step: derive must be (sel, slot, index, blocks, at, gravity, par)");
        return NULL;
    }
    PyObject *const *D = &PyTuple_GET_ITEM(derive, 0);
    PyArrayObject *s0 = plan_array(D[0], 1, NPY_INT64), *s1 = plan_array(D[1], 1, NPY_INT64);
    PyArrayObject *i0 = D[2] == Py_None ? NULL : plan_array(D[2], 1, NPY_INT64);
    if (!s0 || !s1 || PyArray_DIM(s0, 0) != nc || PyArray_DIM(s1, 0) != nc || (D[2] == Py_None) != (r->index == Py_None)
        || memcmp(PyArray_DATA(s0), sel, nc * sizeof *sel) || memcmp(PyArray_DATA(s1), slot, nc * sizeof *slot)
        || Py_TYPE(D[3]) != &KernelType || ((Kernel *)D[3])->nin != 11)
        return NULL;
    if (r->index != Py_None) {
        PyArrayObject *x = (PyArrayObject *)r->index;
        if (!i0 || PyArray_DIM(i0, 0) != PyArray_DIM(x, 0)
            || memcmp(PyArray_DATA(i0), PyArray_DATA(x), PyArray_DIM(x, 0) * sizeof(int64_t)))
            return NULL;
    }
    PyObject *const *out = &PyTuple_GET_ITEM(r->step, 0);
    PyObject *in[11] = {args[1], args[2], out[1], out[2], out[3], out[4], out[5], D[4], r->data, D[5], D[6]};
    return Kernel_run((Kernel *)D[3], in, NULL);
}

/* The step's contacts, warm start and solve once the plan and chain are read: scene_step's answer, None
   where this road declines, NULL on an error. */
static PyObject *step_run(const StepPlan *sp, const StepChain *ch, PyObject *const *args, PyObject *pre,
                          PyObject *chain, PyObject *matcher, PyArrayObject *given, int layout_out, PyObject *derive) {
    StepRefs r = {NULL};
    PyObject *answer = NULL;
    r.found = step_found(pre, sp, &PyTuple_GET_ITEM(args[0], 0), args[1], args[2]);
    if (!r.found || r.found == Py_None) goto done;
    const double *c = PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(r.found, 0));
    const double *within = PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(r.found, 1));
    int64_t sel[SD_MAXCONTACTS], slot[SD_MAXCONTACTS];
    npy_intp nc = step_select(sp, c, within, layout_out, sel, slot);
    if (nc < 0) goto done;
    if (nc > sp->ns) {                                       /* (a trajectory's step in data slots: how many) */
        if (chain && sp->mode == 1) answer = PyLong_FromSsize_t(nc);
        goto done;
    }
    int matched = step_lay_out(sp, ch, c, sel, slot, nc, &r);
    if (matched < 0 || (matcher && !matched && !(r.layout = step_layout(sel, slot, nc)))) goto done;
    if (matcher && !matched) {                               /* the warm start of these contacts */
        r.answer = step_asked(matcher, r.layout, PyTuple_GET_ITEM(r.found, 0), r.data,
                              chain ? PyTuple_GET_ITEM(chain, 2) : NULL);
        if (!r.answer) goto done;
        given = r.answer == Py_None ? NULL : (PyArrayObject *)r.answer;
    }
    /* a warm start of the contacts' shape, finite (else the Python road says what is wrong) */
    const double *w0 = given && PyArray_DIM(given, 0) == nc && PyArray_DIM(given, 1) == 3 ? PyArray_DATA(given) : NULL;
    double *w = PyArray_DATA((PyArrayObject *)r.warm);
    if ((w0 && !all_finite(w0, 3 * nc)) || (matched && !all_finite(w, 3 * sp->ns))) goto done;
    for (npy_intp i = 0; w0 && i < nc; i++)
        memcpy(w + 3 * (sp->mode == 0 ? slot[i] : i), w0 + 3 * i, 3 * sizeof(double));
    PyObject *sin[6] = {args[1], args[2], args[3], args[4], r.warm, r.data};
    r.step = Kernel_run(sp->solve, sin, NULL);
    if (!r.step || !(r.index = step_index(sp, slot, nc))) goto done;
    PyObject *blocks = derive ? step_derived(derive, &r, sel, slot, nc, args) : NULL;
    if (blocks) {                                            /* (the layout met before: its blocks beside the step) */
        answer = PyTuple_Pack(3, r.step, r.index, blocks);
        Py_DECREF(blocks);
    } else if (!PyErr_Occurred())
        answer = step_answer(&r, layout_out, chain, sel, slot, nc);
done:
    step_release(&r);
    return answer || PyErr_Occurred() ? answer : Py_NewRef(Py_None);
}

static PyObject *scene_step(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 6 || nargs > 9 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 15) {
        PyErr_SetString(PyExc_TypeError, "scene_step(plan, q, v, tau, settings, warm[, found[, chain[, derive]]])");
        return NULL;
    }
    PyObject *pre = nargs >= 7 && args[6] != Py_None ? args[6] : NULL;
    PyObject *chain = nargs >= 8 && args[7] != Py_None ? args[7] : NULL;
    PyObject *derive = nargs == 9 && args[8] != Py_None ? args[8] : NULL;
    int layout_out = chain == Py_True;                       /* the contacts' layout returned */
    if (layout_out) chain = NULL;
    if (derive && !layout_out) {
        PyErr_SetString(PyExc_TypeError, "scene_step: derive needs the layout returned (chain True)");
        return NULL;
    }
    PyObject *matcher = PyCallable_Check(args[5]) ? args[5] : NULL;
    PyArrayObject *given = args[5] == Py_None || matcher ? NULL : plan_array(args[5], 2, NPY_DOUBLE);
    if (args[5] != Py_None && !matcher && (!given || PyArray_DIM(given, 1) != 3)) Py_RETURN_NONE;  /* (not impulses) */
    StepPlan sp;
    StepChain ch = {NULL, NULL, NULL, NULL, 0.0};
    int ok = step_plan(&PyTuple_GET_ITEM(args[0], 0), pre != NULL, &sp);
    if (ok <= 0) return ok < 0 ? NULL : Py_NewRef(Py_None);
    if (chain && step_chain(chain, matcher != NULL, sp.K, &ch) < 0) return NULL;
    return step_run(&sp, &ch, args, pre, chain, matcher, given, layout_out, derive);
}
