"""The estimator: the offline phase of an estimation problem done, its online phase written once.

:meth:`Estimator._online` is the one online function (the sparse solve on the fixed elimination
order, and for least squares the ``k + 1`` substitutions, the ``k x k`` normal equations and one
refinement step; see :mod:`sparsedyn.estimation.problem` for the mathematics), generic over the
array backend: the NumPy :meth:`Estimator.solve` runs it with the sparse layer's float checks and
re-solves flagged states densely, ``sparsedyn.compile`` traces it with the check values
(:mod:`.compiled`), and :func:`~sparsedyn.estimation.estimate_derivatives` differentiates it.
"""

from __future__ import annotations

import textwrap

import numpy as np

from .. import _checks
from .. import sparse
from ..kernels import Owned
from ..algorithms.kinematics import joint_transforms, velocity_pass
from ..sparse.assembly import SystemPattern, d_values, rhs_values
from ..sparse.checks import Monitor
from ..sparse.measurements import Kinematics
from .estimate import Estimate
from .verdict import RANK_RTOL, StateSingularError, _rank, _solve_if_well_conditioned

__all__ = ["Estimator"]


def _kinematics(model, q, v):
    Xup, S = joint_transforms(model, q)
    vb, _ = velocity_pass(model, Xup, S, v)
    return Kinematics(model, q, v, Xup, S, vb), Xup


def _monitored(st, q, v, ys, g, batch):
    """The float online phase of ``st`` with the checks of ``check="auto"`` (the monitor is returned)."""
    monitor = Monitor("auto", batch)
    return st.online(q, v, ys, g, batch, False, monitor) + (monitor,)


def _state_matrix(pat, vals):
    """One float state's ``A`` (nrows, n) as a SciPy CSC matrix without explicit zeros: the matrix
    that ``scipy.sparse.csc_matrix(pat.dense(vals))`` gives (duplicates summed, the same nonzeros in
    the same order), without the dense array and its scan."""
    import scipy.sparse as sps
    A = sps.csc_matrix((np.asarray(vals, float), (pat.rows, pat.cols)), shape=(pat.nrows, pat.n))
    A.sum_duplicates()
    A.eliminate_zeros()
    return A


class Estimator:
    """An analysed :class:`~sparsedyn.estimation.EstimationProblem` (offline phase done): :meth:`solve` is
    online only."""

    def __init__(self, problem, verdict, seed=0):
        self.problem, self.verdict = problem, verdict
        self.model = problem.model
        self.n = problem.layout.n
        self.square = verdict.kind == "well posed"
        self.structure = problem._structure if self.square else None
        soft = [e for e in problem.entries if not e.exact] + problem.priors
        self.soft = soft
        self.exact = [e for e in problem.entries if e.exact]
        self.s = sum(e.size for e in soft)
        self.M_soft = np.concatenate([e.matrix(self.n) for e in soft]) if soft else np.zeros((0, self.n))
        C = np.zeros((self.s, self.s))
        r = 0
        for e in soft:
            C[r:r + e.size, r:r + e.size] = e.cov
            r += e.size
        self.cov_soft = C
        self.W = np.linalg.inv(C) if self.s else C
        self._basis = None
        self._seed = seed
        # the whole system's pattern (every sensor's rows; the square structure's own when it is square)
        self._full_pattern = self.structure.pattern if self.square else None
        if not self.square:
            self._build_basis()

    # --- the compiler's view (sparsedyn.kernels, Owners): the online phase as one kernel ---------------
    def __sparsedyn_kernels__(self):
        from .compiled import estimate_kernel, estimator_fingerprint
        kernel = estimate_kernel(self)                 # (builds the least-squares basis first)
        return Owned(self.model, (kernel,), estimator_fingerprint(self))

    def __sparsedyn_compiled__(self, compiled):
        from .compiled import CompiledEstimator
        return CompiledEstimator(self, compiled)

    # --- offline: the square sub-problem of least squares ------------------------------------
    def _build_basis(self):
        p = self.problem
        exact_problem = p._implicit(sparse.Problem(self.model, [e.measurement() for e in self.exact],
                                                   layout=p.layout))
        pat = SystemPattern(exact_problem)
        q = self.model.random_configuration(np.random.default_rng(self._seed + 7))
        E = p._dense(pat, q)
        import scipy.linalg
        rE, Z = p._rank(E, null=True)                           # Z: orthonormal null space of E
        if rE < E.shape[0]:
            raise ValueError(f"{p.name}: the exact rows (Newton-Euler, implicit zeros and exact sensors "
                             f"{[e.name for e in self.exact]}) are not independent (rank {rE} of {E.shape[0]}); "
                             f"give the redundant sensors a covariance (exact=False)")
        k = Z.shape[1]
        Lw = np.linalg.cholesky(self.W)
        HZ = Lw.T @ self.M_soft @ Z
        _, _, piv = scipy.linalg.qr(HZ.T, pivoting=True)
        chosen = sorted(piv[:k].tolist())
        # group the chosen soft rows by entry
        owner = []
        for e in self.soft:
            owner += [(e, j) for j in range(e.size)]
        groups = {}
        for row in chosen:
            e, j = owner[row]
            groups.setdefault(id(e), (e, []))[1].append(j)
        meas = [e.measurement() for e in self.exact] + [e.measurement(js, f"basis {e.name}{js}")
                                                         for e, js in groups.values()]
        bp = p._implicit(sparse.Problem(self.model, meas, name=f"{p.name} (least-squares basis)", layout=p.layout))
        self.basis_rows = chosen
        self.k = k
        self._basis = bp.analyze()
        # rows of the basis system holding the picked soft rows (after Newton-Euler and the exact rows)
        r0 = p.layout.nrows + sum(e.size for e in self.exact)
        self._picked = np.arange(r0, r0 + k)

    # --- online ----------------------------------------------------------------------------
    def _inputs(self, q, v, y, check_values=True):
        """``q, v, y`` checked and broadcast to their common batch shape, and that shape;
        ``check_values=False``: conversion and shapes only (a compiled batch checks the values as it
        reads them, and calls this again to name what failed)."""
        q = _checks.configuration(self.model, q, check_values=check_values)
        v = _checks.vector(self.model, "v", v, self.model.nv, "nv joint velocities", check_values)
        y = self.problem.check_measurements(y, check_values=check_values)
        batch = _checks.batch_shape(q=(q, 1), v=(v, 1), y=(y, 1))
        return (np.broadcast_to(q, batch + q.shape[-1:]), np.broadcast_to(v, batch + v.shape[-1:]),
                np.broadcast_to(y, batch + y.shape[-1:]), batch)

    def solve(self, q, v, y, covariance=False, gravity=None) -> Estimate:
        """Estimate every variable at states ``(q, v)`` from measurements ``y`` (..., ny); batched.

        ``covariance=True`` also returns ``cov_d`` (..., n, n) from the sensor covariances.
        """
        q, v, y, batch = self._inputs(q, v, y)
        g = _checks.gravity(self.model, gravity)
        lsq = not self.square or covariance
        if lsq and self._basis is None:
            self._build_basis()
        systems = []                                   # (vals, b) of the square system, as formed here

        def monitored(st, q, v, ys, g, batch):
            out = _monitored(st, q, v, ys, g, batch)
            systems.append(out[1:3])
            return out
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):    # bad states are redone below
            d, chi2, (Nt, G), monitor = self._online(q, v, y, g, monitored, lsq)
        bad = monitor.bad if not lsq else np.any(monitor.bad, -1)
        if lsq and self.k:                             # k = 0: the exact rows alone fix d (G is 0 x 0)
            ev = np.linalg.eigvalsh(np.where(np.isfinite(G), G, 0.0))
            bad = bad | ~(ev[..., 0] > RANK_RTOL * ev[..., -1]) | ~np.isfinite(G).all((-2, -1))
        bad = np.broadcast_to(bad, batch)
        cov = None
        if covariance:
            cu = np.linalg.inv(np.where(bad[..., None, None], np.eye(self.k), G))
            cov = (Nt, cu)
            if np.any(bad):
                cov = np.swapaxes(Nt, -1, -2) @ cu @ Nt
        chi2 = np.zeros(batch) if chi2 is None else chi2
        if np.any(bad):
            d, chi2 = np.array(d), np.array(chi2, dtype=float)
            where = [i for i in np.ndindex(*batch) if bad[i]]            # () for one state
            if not lsq and len(systems) == 1:          # the square system: the values formed above
                at = np.ravel_multi_index(tuple(zip(*where)), batch) if batch else [0]
                vals, b = (np.broadcast_to(x, x.shape[:1] + batch).reshape(len(x), -1)[:, at] for x in systems[0])
            else:
                vals, b = self._dense_systems(*(np.stack([x[i] for i in where]) for x in (q, v, y)), gravity)
            for j, idx in enumerate(where):
                out = self._dense_state(q[idx], v[idx], y[idx], gravity, idx, covariance, (vals[:, j], b[:, j]))
                d[idx] = out[0]
                if lsq:
                    chi2[idx] = out[2]
                if covariance:
                    cov[idx] = out[1]
        if not lsq:
            return Estimate(self.problem, d, chi2=chi2, dof=0)
        return Estimate(self.problem, d, cov, chi2, self.s - self.k)

    def _online(self, q, v, y, g, solve, lsq=None):
        """The online phase, written once for every backend (NumPy floats with leading batch axes; object
        arrays, which is how ``sparsedyn.compile`` and :func:`~sparsedyn.estimation.estimate_derivatives`
        trace it): ``(d, chi2, (N^T, G), extra)`` (least squares) or ``(d, None, (None, None), extra)``.

        ``solve(st, q, v, ys, g, batch) -> (x, vals, b, W, extra)``: the online phase of structure ``st``
        as the caller wants it (checked by a :class:`~sparsedyn.sparse.checks.Monitor`, with traced check
        values, or bare); ``lsq``: the least-squares form (default: unless the problem is square)."""
        lsq = not self.square if lsq is None else lsq
        batch = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], y.shape[:-1])
        if not lsq:
            x, _, _, _, extra = solve(self.structure, q, v, self.problem.sparse_values(y), g, batch)
            return np.moveaxis(x, 0, -1), None, (None, None), extra
        kb = batch + (self.k + 1,)
        x, vals, b, W, extra = solve(self._basis, q[..., None, :], v[..., None, :], self._lsq_values(y), g, kb)
        d0, Nt, Jt, G, rhs, res0 = self._lsq_core(np.moveaxis(x, 0, -1), q, v, y)
        d, chi2 = self._lsq_finish(d0, Nt, Jt, G, rhs, res0, self._lsq_refiner(vals, W, b, kb))
        return d, chi2, (Nt, G), extra

    # The algebra of least squares, written once for every backend: NumPy floats with batch axes,
    # or object arrays (sparsedyn.compile traces it; the NumPy path keeps its checks around it).
    def _lsq_values(self, y):
        """Values (..., k + 1, ny) of the basis problem for ``y`` (..., ny): the exact sensors' values,
        then the picked soft rows' values (row 0: zeros, the particular solution; row j: unit j), then
        the implicit zeros."""
        k = self.k
        shp = y.shape[:-1] + (k + 1,)
        U = np.concatenate([np.zeros((1, k), dtype=int), np.eye(k, dtype=int)]).astype(y.dtype)   # (k+1, k)
        parts = [np.broadcast_to(y[..., None, e.slot], shp + (e.size,)) for e in self.exact]
        parts += [np.broadcast_to(U, shp + (k,)), np.zeros(shp + (self.problem._n_implicit(),), dtype=y.dtype)]
        return np.concatenate(parts, -1)

    def _lsq_core(self, D, q, v, y):
        """From the basis solutions ``D`` (..., k + 1, n): ``d0``, ``N^T`` (..., k, n), ``J^T`` (..., k, s),
        the normal matrix ``G = J W J^T`` (..., k, k), its right-hand side and the residual at ``d0``."""
        d0 = D[..., 0, :]
        Nt = D[..., 1:, :] - d0[..., None, :]                                  # (..., k, n)
        kin, _ = _kinematics(self.model, q, v)
        yhat0 = d0 @ self.M_soft.T
        ysoft, r = [], 0
        for e in self.soft:
            if e.bias is not None:
                yhat0[..., r:r + e.size] += e.bias(kin)
            ysoft.append(y[..., e.slot] if e.slot is not None else
                         np.broadcast_to(e.sensor.value(e.size), y.shape[:-1] + (e.size,)))
            r += e.size
        ysoft = np.concatenate(ysoft, -1)
        Jt = Nt @ self.M_soft.T                                                # (..., k, s)
        JW = Jt @ self.W
        G = JW @ np.swapaxes(Jt, -1, -2)
        res0 = ysoft - yhat0
        rhs = (JW @ res0[..., None])[..., 0]
        return d0, Nt, Jt, G, rhs, res0

    def _lsq_refiner(self, vals, W, b, batch):
        """``refine(d) -> delta0`` for :meth:`_lsq_finish` from the basis solve's factors (row 0 of the
        right-hand-side axis): ``A delta0 + r = 0`` with ``r`` = the residual ``A d + b`` of the exact
        rows (Newton-Euler, exact sensors, implicit zeros) at ``d`` and 0 on the picked soft rows."""
        st, picked = self._basis, self._picked
        vals0, W0, b0, batch0 = vals[..., 0], W[..., 0], b[..., 0], batch[:-1]

        def refine(d):
            r = st.residual(vals0, b0, np.moveaxis(d, -1, 0))
            r[picked] = 0
            return np.moveaxis(st.substitute(vals0, W0, r, batch0), 0, -1)
        return refine

    def _lsq_finish(self, d0, Nt, Jt, G, rhs, res0, refine=None):
        """``(d, chi2)``: ``u = G^-1 rhs`` by the small dense ``L^T D L`` of :mod:`sparsedyn.ltdl`
        (no pivoting: ``G`` is symmetric positive definite where the checks passed).

        ``refine`` (:meth:`_lsq_refiner`): one step of iterative refinement of the whole constrained
        problem with the same factors: the exact rows' residual at ``d`` is removed by ``delta0`` and
        the soft residual re-minimised over the null space.  Where the picked basis rows are nearly
        dependent at a state (large ``N``, ill-conditioned ``G``) one step takes the error from ~1e-8
        back to ~1e-13, what a dense QR gets."""
        from ..algorithms.ltdl import chain_lambda, ltdl, ltdl_solve
        lam = chain_lambda(self.k)
        L, Dg = ltdl(lam, G)
        u = ltdl_solve(lam, L, Dg, rhs)
        d = d0 + (u[..., None, :] @ Nt)[..., 0, :]
        res = res0 - (u[..., None, :] @ Jt)[..., 0, :]
        if refine is not None:
            delta0 = refine(d)
            d = d + delta0
            res = res - delta0 @ self.M_soft.T
            u = ltdl_solve(lam, L, Dg, ((Jt @ self.W) @ res[..., None])[..., 0])
            d = d + (u[..., None, :] @ Nt)[..., 0, :]
            res = res - (u[..., None, :] @ Jt)[..., 0, :]
        chi2 = ((res @ self.W) * res).sum(-1)
        return d, chi2

    def _dense_systems(self, q, v, y, gravity):
        """The values of the whole system ``A`` (nnz, N) and ``b`` (nrows, N) (every sensor's rows, in
        :attr:`_full_pattern`'s entry order) at the states ``q`` (N, nq), ``v``, ``y``: what
        :meth:`_dense_state` solves, for all the states it is given at once (the same values as one by one:
        the arithmetic is elementwise per state)."""
        p = self.problem
        if self._full_pattern is None:
            self._full_pattern = SystemPattern(p.sparse_problem())
        pat = self._full_pattern
        g = _checks.gravity(self.model, gravity)
        kin, Xup = _kinematics(self.model, q, v)
        batch = q.shape[:-1]
        vals = np.broadcast_to(d_values(pat, Xup, batch, False, kin.S), (pat.nnz,) + batch)
        return vals, rhs_values(pat, q, v, p.sparse_values(y), g, Xup, kin.S, batch, False)

    def _dense_state(self, q, v, y, gravity, idx=(), want_cov=False, system=None):
        """One state by dense linear algebra (fallback and reference): constrained weighted LS.
        ``system``: its ``(vals, b)`` from :meth:`_dense_systems`, if computed already."""
        p = self.problem
        if system is None:
            system = tuple(x[:, 0] for x in self._dense_systems(q[None], v[None], y[None], gravity))
        pat = self._full_pattern
        # A sparse (the transforms computed once; no dense scan), densified only for the SVD below
        As = _state_matrix(pat, system[0])
        b = system[1]
        soft_rows = np.zeros(pat.nrows, bool)
        off = self.problem.layout.nrows
        for e in p.entries + p.priors:
            if not e.exact:
                soft_rows[off:off + e.size] = True
            off += e.size
        if not want_cov:
            d = self._sparse_state(As, b, soft_rows)
            if d is not None:
                r = As.tocsr()[soft_rows] @ d + b[soft_rows]
                return d, None, float(r @ self.W @ r)
        A = As.toarray()
        r, V = _rank(A, True)
        if r < self.n:
            dirs = "; ".join(p.describe_direction(v, q) for v in V.T)
            raise StateSingularError(f"{p.name}: the system is singular at the state with batch index {idx} "
                                     f"(rank {r} of {self.n}); unobservable there: {dirs}", [idx])
        # ordering of soft rows above equals self.soft's order (entries then priors)
        E, e_ = A[~soft_rows], b[~soft_rows]
        H, h = A[soft_rows], b[soft_rows]
        dp = np.linalg.lstsq(E, -e_, rcond=None)[0]
        _, sE, VEt = np.linalg.svd(E)
        rE = int(np.sum(sE > RANK_RTOL * sE[0]))
        Z = VEt[rE:].T
        if Z.shape[1] == 0:
            return dp, np.zeros((self.n, self.n)), 0.0
        HZ = H @ Z
        res = -(H @ dp + h)
        Gz = HZ.T @ self.W @ HZ
        z = np.linalg.solve(Gz, HZ.T @ self.W @ res)
        d = dp + Z @ z
        rr = res - HZ @ z
        return d, Z @ np.linalg.inv(Gz) @ Z.T, float(rr @ self.W @ rr)

    def _sparse_state(self, A, b, soft):
        """``d`` of one state's system ``A d + b = 0`` (``A``: SciPy sparse, :func:`_state_matrix`; rows
        ``soft`` in the weighted least-squares sense, the others exactly) by a sparse LU of the square
        system or of the augmented system of the constrained problem (Bjorck, "Numerical Methods for Least Squares Problems", 1996)::

            [ C    0   -H ] [rho]   [ h]        rho = W (H d + h),  C = W^-1 (the soft covariances)
            [ 0    0    E ] [lam] = [-e]        E d + e = 0        (the exact rows)
            [ H^T  E^T  0 ] [ d ]   [ 0]        H^T rho + E^T lam = 0

        (conditioned like the problem, not like its normal equations), once the rank of ``A`` is known
        to be full (the problem's rank test, the Newton-Euler rows eliminated first: what the verdict
        uses); ``None`` where the conditioning or the rank leaves a doubt (the SVD then decides)."""
        if A.shape[0] == A.shape[1]:                   # square: every row holds exactly
            return _solve_if_well_conditioned(A, -b)
        if self.problem._rank(A)[0] < self.n:
            return None
        import scipy.sparse as sps
        As = A.tocsr()
        E, e, H, h = As[~soft], b[~soft], As[soft], b[soft]
        s, m, n = H.shape[0], E.shape[0], self.n
        K = sps.bmat([[sps.csr_matrix(self.cov_soft), None, -H], [None, None, E], [H.T, E.T, None]],
                     format="csc")                 # assembled sparse: no dense (s + m + n)^2 scan
        sol = _solve_if_well_conditioned(K, np.concatenate([h, -e, np.zeros(n)]), certify=False)
        return None if sol is None else sol[s + m:]

    def dense_reference(self, q, v, y, gravity=None):
        """Dense constrained weighted least squares at one state: ``(d, cov_d, chi2)`` (for tests)."""
        q, v, y, _ = self._inputs(q, v, y)
        return self._dense_state(q, v, y, gravity, (), True)

    # --- cost ------------------------------------------------------------------------------
    def flops(self, seed=0) -> dict:
        """Operation counts of one solve (exact trace of the sparse part) and of a dense solve.

        Returns ``{"sparse": {phase: flops}, "total": .., "dense": .., "dense_formula": str, "k": ..,
        "n": .., "rows": ..}``; ``flops`` = mul + add + div.  Least squares also has ``"post"`` (the
        k x k normal equations), ``"refine"`` (the refinement step) and ``"separate"`` (what k + 1
        independent sparse solves, each refactoring ``A``, would cost instead of ``"total"``).
        """
        from ..sparse.flops import count_solve
        st = self.structure if self.square else self._basis
        ph = {k: v["mul"] + v["add"] + v["div"] for k, v in count_solve(st, seed=seed).items()}
        one = sum(ph.values())
        n, m = self.n, self.verdict.nrows
        out = {"sparse": ph, "n": n, "rows": m}
        if self.square:
            out.update(total=one, k=0,
                       dense=int(round(2 * n ** 3 / 3 + 2 * n ** 2)),
                       dense_formula="dense LU of the n x n system: 2/3 n^3 + 2 n^2")
        else:
            k, s = self.k, self.s
            nnzM = int(np.count_nonzero(self.M_soft))
            post = 2 * nnzM * k + 2 * s * s * k + 2 * k * k * s + k ** 3 // 3 + 2 * k * k + 2 * n * k + 2 * s * k
            fixed = ph.get("transforms", 0) + ph.get("b", 0) + ph.get("factor", 0)
            # refinement: residual A d + b, one more substitution, M_soft delta0, J W res, the k x k
            # solve, and the updates of d and of the soft residual
            refine = (ph.get("solve", 0) + 2 * self._basis.nnz + 2 * nnzM + 2 * k * s + 2 * k * k
                      + 2 * n * k + 2 * s * k)
            out.update(k=k, total=fixed + (k + 1) * ph.get("solve", 0) + post + refine,
                       separate=(k + 1) * one + post + refine, post=post, refine=refine,
                       dense=int(round(2 * m * n ** 2 - 2 * n ** 3 / 3)),
                       dense_formula="dense QR least squares of the m x n system: 2 m n^2 - 2/3 n^3")
        return out

    def report(self, flops=True, width=100) -> str:
        """Verdict, measurement layout, unknowns and (``flops=True``) the cost per solve, in lines of
        at most ``width`` characters.  Flops = multiplications + additions + divisions of one solve,
        counted exactly on the sparse pattern; the dense figure is the textbook count for the same
        system solved densely."""
        p = self.problem
        wrap = lambda t: textwrap.wrap(t, width, subsequent_indent="    ")   # noqa: E731
        lines = self.verdict.lines(width) + wrap("measurement vector y: " + p.layout_text())
        unk = [f"joint torques of {sum(1 for i in range(self.model.nbodies) if self.model.joints[i].nv and i not in p.unactuated)} joints",
               f"joint wrenches of {self.model.nbodies} joints"]
        if p.contacts:
            unk.append("contact wrenches at " + ", ".join(c.frame for c in p.contacts))
        if p.unknown_accelerations:
            unk.append("accelerations of " + ", ".join(self.model.joint_names[i] for i in p.unknown_accelerations))
        lines += wrap("unknowns: " + "; ".join(unk))
        if flops:
            f = self.flops()
            if self.square:
                text = (f"flops per solve: {f['total']:,} on the sparse pattern "
                        f"({', '.join(f'{k} {v:,}' for k, v in f['sparse'].items())}) vs {f['dense']:,} for a "
                        f"{f['dense_formula']} ({f['dense'] / f['total']:,.0f}x)")
            else:
                text = (f"flops per solve: {f['total']:,} (one factorization of the square basis system, "
                        f"{f['k'] + 1} substitutions, {f['post']:,} for the {f['k']}x{f['k']} normal equations, "
                        f"{f['refine']:,} for one refinement step; {f['separate']:,} if each of the {f['k'] + 1} "
                        f"right-hand sides refactored) vs {f['dense']:,} for a {f['dense_formula']} "
                        f"({f['dense'] / f['total']:,.0f}x)")
            lines += wrap(text)
        return "\n".join(lines)
