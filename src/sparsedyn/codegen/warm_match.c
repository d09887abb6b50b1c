/* A trajectory's warm start in scene_step (scene_step.c): the impulses each contact of a step starts
   from, matched from the step before's contacts as scene_step.matched_warm_start matches them, entry by
   entry the same arithmetic.  A contact's rows are [p (3, its body's axes), n (3), offset]; two contacts
   may match where their scene pairs are equal.  Each routine writes into ``w`` (zeros on entry) each
   contact's impulse in row ``at[i]``, or ``i`` where ``at`` is NULL. */

/* The squared distance's root between two points, summed as NumPy sums three squares:
   sqrt((dx^2 + dy^2) + dz^2). */
static double point_distance(const double *a, const double *b) {
    double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
    dx *= dx;
    dy *= dy;
    dz *= dz;
    double d = dx + dy;
    d += dz;
    return sqrt(d);
}

/* The contact frame's axes R[k] = [t_k, b_k, n_k] (rows k of the columns t, b, n) of a unit normal n (3)
   as friction_problem.plane_basis makes them: t the world x axis projected onto the plane (y where n is
   within 26 degrees of x), b = n x t; the same operations in the same order. */
static void plane_frame(const double *p, double R[3][3]) {
    double size = sqrt((p[0] * p[0] + p[1] * p[1]) + p[2] * p[2]), n[3], t[3];
    for (int k = 0; k < 3; k++) n[k] = p[k] / size;
    double w = 0.5 * (1.0 + copysign(1.0, copysign(n[0], 1.0) - 0.9));       /* 1: project the y axis */
    double en = (1.0 - w) * n[0] + w * n[1];
    t[0] = (1.0 - w) - en * n[0];
    t[1] = w - en * n[1];
    t[2] = -en * n[2];
    double r = sqrt((t[0] * t[0] + t[1] * t[1]) + t[2] * t[2]);
    for (int k = 0; k < 3; k++) t[k] = t[k] / r;
    double b[3] = {n[1] * t[2] - n[2] * t[1], n[2] * t[0] - n[0] * t[2], n[0] * t[1] - n[1] * t[0]};
    for (int k = 0; k < 3; k++) R[k][0] = t[k], R[k][1] = b[k], R[k][2] = n[k];
}

/* An impulse l (3) turned from the frame of the normal n0 into that of n: R^T R0 l, as
   friction_problem.turned_impulses sums it (the world vector R0 l first, each sum left to right). */
static void turned(const double *n, const double *n0, const double *l, double *out) {
    double R[3][3], R0[3][3], v[3];
    plane_frame(n, R);
    plane_frame(n0, R0);
    for (int j = 0; j < 3; j++) v[j] = R0[j][0] * l[0] + R0[j][1] * l[1] + R0[j][2] * l[2];
    for (int i = 0; i < 3; i++) out[i] = R[0][i] * v[0] + R[1][i] * v[1] + R[2][i] * v[2];
}

/* The warm start of ``nc`` contacts (scene pairs ``pair``, rows ``rows`` (nc, 7)) from the step before's
   (``p0``, ``r0``, impulses ``l0``, ``n0`` of them) where the matching is plain: no contact before or
   now (zeros), or the same pairs in the same order with the same points and normals (the impulses), or
   each pair once, each contact's impulse kept where its point moved by at most ``radius`` (else zero),
   turned into its new frame where a kept contact's normal (its bytes) changed.  Returns 1 where
   written; -1 where the matching is general (match_general: pairs that changed, a pair twice). */
static int match_plain(const int64_t *p0, const double *r0, const double *l0, npy_intp n0, const int64_t *pair,
                       const double *rows, npy_intp nc, double radius, double *w, const int64_t *at) {
    if (!nc || !n0) return 1;
    if (n0 != nc || memcmp(p0, pair, nc * sizeof *pair)) return -1;
    int same = 1;
    for (npy_intp i = 0; same && i < nc; i++) same = !memcmp(r0 + 7 * i, rows + 7 * i, 6 * sizeof(double));
    if (!same) {
        for (npy_intp i = 0; i < nc; i++)
            for (npy_intp j = i + 1; j < nc; j++)
                if (pair[i] == pair[j]) return -1;
    }
    int keep[SD_MAXCONTACTS], turn = 0;
    for (npy_intp i = 0; i < nc; i++) {
        keep[i] = same || point_distance(rows + 7 * i, r0 + 7 * i) <= radius;
        turn = turn || (keep[i] && memcmp(r0 + 7 * i + 3, rows + 7 * i + 3, 3 * sizeof(double)));
    }
    for (npy_intp i = 0; i < nc; i++) {                      /* where one kept normal turned, every kept turned */
        double *x = w + 3 * (at ? at[i] : i);
        if (keep[i] && turn) turned(rows + 7 * i + 3, r0 + 7 * i + 3, l0 + 3 * i, x);
        else if (keep[i]) memcpy(x, l0 + 3 * i, 3 * sizeof(double));
    }
    return 1;
}

/* The general matching, as match_plain's arguments (both sets not empty): each contact, in order, takes
   the impulse of the nearest previous contact of its pair (the first of equals) whose point lies within
   ``radius`` and that no contact before it took; the others start from zero.  The impulses are taken as
   they are where every matched pair has equal normals (a floor's contacts), else turned into the new
   frames.  Returns 1, written; 0 where memory ran out (the Python matcher then). */
static int match_general(const int64_t *p0, const double *r0, const double *l0, npy_intp n0, const int64_t *pair,
                         const double *rows, npy_intp nc, double radius, double *w, const int64_t *at) {
    double *D = malloc((size_t)nc * (size_t)n0 * sizeof *D);
    if (!D) return 0;
    for (npy_intp i = 0; i < nc; i++)                        /* D[i, j]: other pairs never match */
        for (npy_intp j = 0; j < n0; j++)
            D[i * n0 + j] = pair[i] == p0[j] ? point_distance(rows + 7 * i, r0 + 7 * j) : INFINITY;
    npy_intp took[SD_MAXCONTACTS];
    int ok = 1;
    for (npy_intp i = 0; i < nc; i++) {
        const double *d = D + i * n0;
        npy_intp j = 0;
        for (npy_intp k = 1; k < n0; k++)
            if (d[k] < d[j]) j = k;
        took[i] = d[j] <= radius ? j : -1;
        if (took[i] < 0) continue;
        for (npy_intp k = 0; k < nc; k++) D[k * n0 + j] = INFINITY;          /* taken */
        const double *a = rows + 7 * i + 3, *b = r0 + 7 * j + 3;
        ok = ok && a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
    }
    free(D);
    for (npy_intp i = 0; i < nc; i++) {                      /* where one matched normal turned, every matched turned */
        double *x = w + 3 * (at ? at[i] : i);
        if (took[i] >= 0 && !ok) turned(rows + 7 * i + 3, r0 + 7 * took[i] + 3, l0 + 3 * took[i], x);
        else if (took[i] >= 0) memcpy(x, l0 + 3 * took[i], 3 * sizeof(double));
    }
    return 1;
}
