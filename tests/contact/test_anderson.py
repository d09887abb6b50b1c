"""Anderson's acceleration of the contact step's ADMM (sparsedyn.contact.anderson): on a linear
contraction it is GMRES (Walker and Ni 2011), exact after as many steps as the dimension where the memory
holds them, while the plain iteration has barely moved; its safeguard refuses a step whose residual grows
(the plain step, an empty memory); a new map (``clear``) empties the memory."""

import numpy as np

from sparsedyn.contact.anderson import FAR, anderson_step


def _memory(k, n):
    """An empty memory of ``k`` pairs of ``n`` rows, as the kernel's loop state holds it."""
    return dict(dW=np.zeros(k * n), dF=np.zeros(k * n), c=np.zeros(k), A=np.zeros(k * k), Tp=np.zeros(n),
                fp=np.zeros(n), have=np.zeros(1), fbest=np.array([FAR]), refused=np.zeros(1))


def _step(k, S, w, Tw, clear):
    """:func:`anderson_step`, its memory then packed as the kernel's loop state packs it between stages
    (each entry a flat array: the step writes numbers where it reads one-element rows)."""
    out = anderson_step(k, S, w, Tw, clear)
    S.update({n: np.reshape(np.asarray(x, float), -1) for n, x in S.items()})
    return out


def test_on_a_linear_contraction_it_is_exact_after_the_dimension_in_steps():
    """``T(w) = A w + b``, ``A`` symmetric with eigenvalues 0.5 to 0.9 in 4 dimensions, memory 6: the first
    two steps are plain (the memory holds differences from the second on); after five more, whose four
    differences span the space, the residual ``|T(w) - w|`` is at the rounding of the least squares (``A - I``'s
    conditioning is 5; the regularisation is 1e-10 of its trace), where the plain iteration, which shrinks
    each eigenvector's part of the residual by at most half a step, keeps at least ``0.5^7`` of it."""
    rng = np.random.default_rng(3)
    Q = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    A = Q @ np.diag([0.5, 0.6, 0.8, 0.9]) @ Q.T
    b = rng.normal(size=4)
    T = lambda w: A @ w + b                                         # noqa: E731
    w0 = Q[:, 3]
    S, w = _memory(6, 4), w0
    for j in range(7):
        w = _step(6, S, w, T(w), float(j == 0))
    plain = w0
    for _ in range(7):
        plain = T(plain)
    r0 = np.linalg.norm(T(w0) - w0)
    assert np.linalg.norm(T(w) - w) <= 1e-10 * r0
    assert np.linalg.norm(T(plain) - plain) >= 0.5 ** 7 * r0
    assert S["refused"][0] == 0.0


def test_a_step_whose_residual_grows_is_refused_and_a_new_map_empties_the_memory():
    """A residual above the memory's smallest: the plain ``Tw`` to the bit, the memory's columns marked
    unused (``c``, ``A`` zero), one refusal counted, the smallest residual kept; ``clear`` (a new ``rho``):
    the memory empty and its smallest residual :data:`~sparsedyn.contact.anderson.FAR` whatever the step."""
    rng = np.random.default_rng(5)
    S = _memory(3, 5)
    S.update(c=np.ones(3), A=np.eye(3).ravel(), have=np.ones(1), fbest=np.array([1e-3]),
             dW=rng.normal(size=15), dF=rng.normal(size=15))
    w, Tw = rng.normal(size=5), rng.normal(size=5)
    assert np.array_equal(_step(3, S, w, Tw, 0.0), Tw)
    assert not S["c"].any() and not S["A"].any() and S["refused"][0] == 1.0 and S["fbest"][0] == 1e-3
    _step(3, S, w, Tw, 1.0)
    assert S["have"][0] == 0.0 and S["fbest"][0] == FAR and S["refused"][0] == 0.0
