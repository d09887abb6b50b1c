/* Part of the fast-call extension (fastcall.c includes it; fastcall.py pastes it in): a public function's
   direct road to its model's native callable. */

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
