import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.model.builders import random_tree, serial_chain
from sparsedyn.algorithms.ltdl import chain_lambda, dof_lambda, ltdl_inverse_factor, ltdl_kernel, ltl_kernel, spd_inverse
from sparsedyn.symbolic.ir import Graph
from conftest import random_state, rel_err, rounding_bound, solve_bound


def pattern_from_bodies(model):
    """Branch-induced pattern from the body tree alone: dofs of bodies b and c are coupled
    iff one body is an ancestor-or-self of the other (RBDA section 6.3)."""
    n = model.nv
    P = np.zeros((n, n), bool)
    for r in range(n):
        for c in range(n):
            b, d = model.dof_body[r], model.dof_body[c]
            P[r, c] = b in model.ancestors(d) or d in model.ancestors(b)
    return P


def dof_depths(model):
    """Number of proper ancestors of each dof in the expanded tree, from the body tree:
    the dofs of all ancestor bodies plus the earlier dofs of the same joint."""
    d = []
    for b in range(model.nbodies):
        above = sum(model.joints[a].nv for a in model.ancestors(b)[1:])
        d.extend(above + r for r in range(model.joints[b].nv))
    return np.array(d, dtype=int)


def generic_in_pattern(H, P, rng):
    """H plus a small symmetric perturbation filling every entry of the pattern P (still SPD):
    removes entries that vanish only by coincidence of axes (e.g. perpendicular joints)."""
    R = rng.uniform(0.5, 1.0, size=H.shape) * P
    R = (R + R.T) / 2
    return H + 0.5 * np.linalg.eigvalsh(H).min() / np.linalg.norm(R, 2) * R


def test_sparsity_pattern_is_branch_induced(tree, rng):
    P = sd.sparsity_pattern(tree)
    np.testing.assert_array_equal(P, pattern_from_bodies(tree))
    np.testing.assert_array_equal(sd.sparsity_pattern(tree.dof_parent), P)
    # H lives inside it
    q, _, _ = random_state(tree, rng)
    assert not sd.crba(tree, q)[~P].any()


def test_ltdl_reconstructs_H_with_zero_fill_in(tree, rng):
    q, _, _ = random_state(tree, rng)
    H = sd.crba(tree, q)
    P = sd.sparsity_pattern(tree)
    lower = np.tril(P)
    L, D = sd.ltdl(tree, H)
    assert rel_err(L.T @ np.diag(D) @ L, H) < 1e-12
    assert np.all(D > 0)
    np.testing.assert_array_equal(np.diag(L), 1.0)
    # no fill-in: the factor is zero outside H's branch-induced pattern ...
    assert not L[~lower].any()
    # ... and fills all of it for generic values: the factor's pattern *is* H's lower pattern
    Hg = generic_in_pattern(H, P, rng)
    np.testing.assert_array_equal(Hg != 0, P)
    Lg, Dg = sd.ltdl(tree, Hg)
    np.testing.assert_array_equal(Lg != 0, lower)
    assert rel_err(Lg.T @ np.diag(Dg) @ Lg, Hg) < 1e-12
    # ... and the in-situ kernel never reads or writes outside the pattern: NaNs placed there survive
    # untouched and do not leak into the factor
    Hn = np.where(P, H, np.nan)
    packed = ltdl_kernel(dof_lambda(tree), Hn)
    assert np.all(np.isnan(packed[~P])) and np.all(np.isfinite(packed[P]))
    np.testing.assert_array_equal(np.tril(packed, -1)[lower & ~np.eye(tree.nv, dtype=bool)],
                                  L[lower & ~np.eye(tree.nv, dtype=bool)])
    np.testing.assert_array_equal(np.diag(packed), D)


def test_ltl_reconstructs_H_with_zero_fill_in(tree, rng):
    q, _, _ = random_state(tree, rng)
    H = sd.crba(tree, q)
    P = sd.sparsity_pattern(tree)
    L = sd.ltl(tree, H)
    assert rel_err(L.T @ L, H) < 1e-12
    assert not L[~np.tril(P)].any()
    np.testing.assert_array_equal(sd.ltl(tree, generic_in_pattern(H, P, rng)) != 0, np.tril(P))
    packed = ltl_kernel(dof_lambda(tree), np.where(P, H, np.nan))
    assert np.all(np.isnan(packed[~P])) and np.all(np.isfinite(packed[P]))
    # same factor as LTDL: L_ltl = sqrt(D) L_ltdl
    Lu, D = sd.ltdl(tree, H)
    assert rel_err(L, np.sqrt(D)[:, None] * Lu) < 1e-12


def test_products_and_solves_match_dense_algebra(tree, rng):
    q, _, _ = random_state(tree, rng)
    H = sd.crba(tree, q)
    x = rng.normal(size=tree.nv)
    L = sd.ltl(tree, H)
    assert rel_err(sd.mpyL(tree, L, x), L @ x) < 1e-13
    assert rel_err(sd.mpyLt(tree, L, x), L.T @ x) < 1e-13
    assert rel_err(L @ sd.mpyLi(tree, L, x), x) < 1e-12
    assert rel_err(L.T @ sd.mpyLit(tree, L, x), x) < 1e-12
    Lu, D = sd.ltdl(tree, H)
    for unit_result, dense in ((sd.mpyL(tree, Lu, x, unit=True), Lu @ x),
                               (sd.mpyLt(tree, Lu, x, unit=True), Lu.T @ x)):
        assert rel_err(unit_result, dense) < 1e-13
    assert rel_err(Lu @ sd.mpyLi(tree, Lu, x, unit=True), x) < 1e-12
    assert rel_err(Lu.T @ sd.mpyLit(tree, Lu, x, unit=True), x) < 1e-12
    # unit=True ignores the stored diagonal
    Lbad = Lu + 5 * np.eye(tree.nv)
    assert rel_err(sd.mpyLi(tree, Lbad, x, unit=True), sd.mpyLi(tree, Lu, x)) < 1e-15
    # solves
    b = rng.normal(size=tree.nv)
    xs = np.linalg.solve(H, b)
    assert rel_err(sd.ltdl_solve(tree, Lu, D, b), xs) < 1e-10
    assert rel_err(sd.ltl_solve(tree, L, b), xs) < 1e-10


def test_batched_factorizations_equal_singles(tree, rng):
    Q, _, _ = random_state(tree, rng, (3,))
    H = sd.crba(tree, Q)
    L, D = sd.ltdl(tree, H)
    Ll = sd.ltl(tree, H)
    B = rng.normal(size=(3, tree.nv))
    X = sd.ltdl_solve(tree, L, D, B)
    assert L.shape == H.shape and D.shape == (3, tree.nv) and X.shape == (3, tree.nv)
    for k in range(3):
        L1, D1 = sd.ltdl(tree, H[k])
        np.testing.assert_array_equal(L[k], L1)
        np.testing.assert_array_equal(D[k], D1)
        np.testing.assert_array_equal(Ll[k], sd.ltl(tree, H[k]))
        np.testing.assert_array_equal(X[k], sd.ltdl_solve(tree, L1, D1, B[k]))
        np.testing.assert_array_equal(sd.mpyLt(tree, Ll, B)[k], sd.mpyLt(tree, Ll[k], B[k]))
    # one factor, a batch of right-hand sides
    X0 = sd.ltdl_solve(tree, L[0], D[0], B)
    for k in range(3):
        np.testing.assert_array_equal(X0[k], sd.ltdl_solve(tree, L[0], D[0], B[k]))


def test_inverse_factor_keeps_the_pattern_and_inverts_H(tree, rng):
    q, _, _ = random_state(tree, rng)
    P = sd.sparsity_pattern(tree)
    H = generic_in_pattern(sd.crba(tree, q), P, rng)
    lam = dof_lambda(tree)
    L, D = sd.ltdl(tree, H)
    W, Dinv = ltdl_inverse_factor(lam, ltdl_kernel(lam, H))
    # Rounding bounds from the conditioning: a column of W = L^-1 solves L w = e_j, a column of
    # H^-1 solves H x = e_j (two such evaluations differ by solve_bound); the residual W L - 1 and
    # the pivots by the rounding of the factorisation, cond(L) and cond(H) times that of a product.
    Hinv = np.linalg.inv(H)
    w_bound = float(np.max(solve_bound(L, W.T)))
    pivot_bound = rounding_bound(tree.nv, np.linalg.cond(H))
    assert rel_err(W @ L, np.eye(tree.nv)) < rounding_bound(tree.nv, np.linalg.cond(L))
    assert rel_err(Dinv * D, np.ones(tree.nv)) < pivot_bound
    assert rel_err(W @ np.diag(Dinv) @ W.T, Hinv) < float(np.max(solve_bound(H, Hinv.T)))
    np.testing.assert_array_equal(W != 0, np.tril(P))           # L^-1 has L's pattern on a tree: no fill-in
    # traced: entries outside the pattern are exact integer zeros (the tracer folds them)
    Wo, _ = ltdl_inverse_factor(lam, ltdl_kernel(lam, Graph().inputs(0, H.shape)))
    assert all(type(x) is int and x == 0 for x in Wo[~np.tril(P)])
    assert all(type(x) is int and x == 1 for x in np.diag(Wo))
    Hb = np.stack([H, 2 * H])                                    # leading batch axes
    Wb, Db = ltdl_inverse_factor(lam, ltdl_kernel(lam, Hb))
    # the batch's matrix products sum in another order (BLAS): equal to the rounding bounds above
    assert rel_err(Wb[1], W) < w_bound and rel_err(Db[1], Dinv / 2) < pivot_bound


def test_object_arrays_give_the_same_numbers(tree, rng):
    q, _, _ = random_state(tree, rng)
    H = sd.crba(tree, q)
    b = rng.normal(size=tree.nv)
    Ho, bo = H.astype(object), b.astype(object)
    L, D = sd.ltdl(tree, H)
    Lo, Do = sd.ltdl(tree, Ho)
    assert Lo.dtype == object and Do.dtype == object
    assert rel_err(Lo.astype(float), L) < 1e-13 and rel_err(Do.astype(float), D) < 1e-13
    # structural zeros and ones of the unpacked factor stay exact integers (for the tracer to fold)
    P = sd.sparsity_pattern(tree)
    assert all(type(x) is int and x == 0 for x in Lo[~np.tril(P)])
    assert all(type(x) is int and x == 1 for x in np.diag(Lo))
    xo = sd.ltdl_solve(tree, Lo, Do, bo)
    assert xo.dtype == object
    # float L, D come from LAPACK's Cholesky (ltdl_kernel's float path), the object ones from the tree
    # loop: two backward-stable factorizations, whose solves agree to the conditioning of H
    assert rel_err(xo.astype(float), sd.ltdl_solve(tree, L, D, b)) < np.finfo(float).eps * np.linalg.cond(H)
    Ll = sd.ltl(tree, H)
    Llo = sd.ltl(tree, Ho)
    assert rel_err(Llo.astype(float), Ll) < 1e-13
    for f in (sd.mpyL, sd.mpyLt, sd.mpyLi, sd.mpyLit):
        assert rel_err(f(tree, Llo, bo).astype(float), f(tree, Ll, b)) < 1e-12


def test_spd_inverse_small_dense(rng):
    for n in range(1, 7):
        A = rng.normal(size=(4, n, n))
        A = A @ np.swapaxes(A, -1, -2) + n * np.eye(n)
        Ai = spd_inverse(A)
        assert rel_err(Ai @ A, np.broadcast_to(np.eye(n), A.shape)) < 1e-12
        Aio = spd_inverse(A[0].astype(object))
        assert Aio.dtype == object and rel_err(Aio.astype(float), Ai[0]) < 1e-12


# --- operation counts ---------------------------------------------------------------

class Counted:
    """A scalar that counts the multiplications and divisions performed with it."""

    muls = 0
    divs = 0

    def __init__(self, x):
        self.x = float(x)

    @staticmethod
    def _val(y):
        return y.x if isinstance(y, Counted) else y

    def __mul__(self, y):
        Counted.muls += 1
        return Counted(self.x * self._val(y))

    __rmul__ = __mul__

    def __truediv__(self, y):
        Counted.divs += 1
        return Counted(self.x / self._val(y))

    def __rtruediv__(self, y):
        Counted.divs += 1
        return Counted(y / self.x)

    def __add__(self, y):
        return Counted(self.x + self._val(y))

    __radd__ = __add__

    def __sub__(self, y):
        return Counted(self.x - self._val(y))

    def __rsub__(self, y):
        return Counted(y - self.x)

    def sqrt(self):
        return Counted(np.sqrt(self.x))

    @classmethod
    def count(cls, fn, *args):
        cls.muls = cls.divs = 0
        out = fn(*args)
        return out, cls.muls, cls.divs


def counted_ltdl(model, H):
    lam = dof_lambda(model)
    Hc = np.frompyfunc(Counted, 1, 1)(H).astype(object)
    packed, muls, divs = Counted.count(ltdl_kernel, lam, Hc)
    L = np.tril(np.vectorize(lambda c: c.x, otypes=[float])(packed), -1) + np.eye(model.nv)
    D = np.vectorize(lambda c: c.x, otypes=[float])(np.diag(packed))
    assert rel_err(np.where(sd.sparsity_pattern(model), L, 0.0).T @ np.diag(D) @ np.where(
        sd.sparsity_pattern(model), L, 0.0), H) < 1e-12
    return muls, divs


@pytest.mark.parametrize("n", [5, 10, 20])
def test_ltdl_operation_count_on_a_chain(n):
    """Serial chain of n 1-dof links: exactly (n^3 - n)/6 multiplications and (n^2 - n)/2
    divisions (Featherstone, Rigid Body Dynamics Algorithms, Table 10.1 -- the cost of
    factorizing a dense n x n matrix, since a chain's H has no branch-induced zeros)."""
    model = serial_chain(n)
    H = sd.crba(model, np.random.default_rng(n).uniform(-1, 1, n))
    muls, divs = counted_ltdl(model, H)
    assert muls == (n ** 3 - n) // 6
    assert divs == (n ** 2 - n) // 2
    assert chain_lambda(n) == list(model.dof_parent)


BRANCHED = [
    lambda: random_tree(31, branching=2.0, seed=5),
    lambda: random_tree(40, branching=3.0, joint_types="all", seed=6, floating_base=True),
    lambda: sd.model.builders.humanoid(),
]


@pytest.mark.parametrize("make", BRANCHED, ids=["binary31", "bf3-all-floating", "humanoid"])
def test_ltdl_operation_count_on_branched_trees(make):
    """With d_k the number of proper ancestors of dof k, the inner loop of the seed's LTDL runs
    once per ancestor j-or-self of each ancestor i of k, so the factorization costs exactly
    sum_k d_k (d_k + 1) / 2 multiplications and sum_k d_k divisions: O(n d^2) for depth d
    (featherstone-crba-ltdl seed, 'Exploiting Sparsity'), instead of the dense (n^3 - n)/6."""
    model = make()
    n = model.nv
    d = dof_depths(model)
    H = sd.crba(model, model.random_configuration(0))
    muls, divs = counted_ltdl(model, H)
    assert muls == int(np.sum(d * (d + 1) // 2))
    assert divs == int(np.sum(d))
    dmax = int(d.max()) + 1                                  # depth of the expanded tree
    assert muls <= n * dmax * (dmax - 1) // 2                # the O(n d^2) bound
    dense = (n ** 3 - n) // 6
    assert muls < dense / 3, (muls, dense)
    # LTL performs the same multiplications and divisions (plus n square roots)
    Hc = np.frompyfunc(Counted, 1, 1)(H).astype(object)
    _, lmuls, ldivs = Counted.count(ltl_kernel, dof_lambda(model), Hc)
    assert (lmuls, ldivs) == (muls, divs)


# --- bad input ------------------------------------------------------------------------

def test_bad_arguments_are_named(tree):
    H = np.eye(tree.nv)
    with pytest.raises(ValueError, match=rf"H: expected shape \(\.\.\., {tree.nv}, {tree.nv}\)"):
        sd.ltdl(tree, H[:-1])
    with pytest.raises(ValueError, match=rf"L: expected shape \(\.\.\., {tree.nv}, {tree.nv}\)"):
        sd.mpyL(tree, H[:, :-1], np.zeros(tree.nv))
    with pytest.raises(ValueError, match=rf"x: expected shape \(\.\.\., {tree.nv}\)"):
        sd.mpyLi(tree, H, np.zeros(tree.nv + 1))
    with pytest.raises(ValueError, match=r"lambda\[2\] = 5"):
        sd.ltdl([-1, 0, 5], np.eye(3))
