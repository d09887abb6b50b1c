"""Flop counts from the IR against Featherstone's published counts (RBDA Table 10.1).

Featherstone counts a serial chain of ``n`` revolute joints:

=========  ====================  ====================
algorithm  multiplications       additions
=========  ====================  ====================
RNEA       93n - 108             81n - 100
ABA        224n - 259            205n - 248
CRBA       10n^2 + 22n - 32      6n^2 + 37n - 43
=========  ====================  ====================

Three chains of revolute joints are measured here, all with the joint axis the
z axis of the joint frame (as in the book).  The counts are exact formulas in
``n`` (checked on several ``n``):

* ``serial_chain(n)``: parallel axes, each joint frame displaced along x from
  the previous one (a planar chain).  The tracer folds every structural zero of
  this geometry, and the counts are far *below* the book's, for every n >= 2:
  RNEA 25n - 30 / 23n - 32, ABA 54n - 83 / 43n - 73, CRBA (5n^2 - 11n + 8)/2 /
  (3n^2 + 5n - 14)/2, Minv (11n^2 + 33n - 96)/2 / (11n^2 - 3n - 34)/2 (n >= 3).

* ``general_chain(n)``: every ``Xtree`` a general rotation and translation (6
  parameters), general inertias.  Exactly RNEA 154n - 182 / 126n - 162,
  ABA 328n - 473 / 270n - 400 (plus n - 1 divisions: the leaf's D is a
  constant), CRBA 12n^2 + 41n - 97 / 9n^2 + 44n - 89, Minv 12n^2 + 215n - 437 /
  (23n^2 + 291n - 600)/2 (n >= 3).  (Before the structured spatial operations:
  RNEA 154n - 182 / 128n - 162, ABA 545n - 949 / 462n - 800, CRBA
  12n^2 + 302n - 711 / 9n^2 + 262n - 571, Minv 31n^2 + 327n - 805 /
  (49n^2 + 545n - 1300)/2.)

* ``dh_chain(n)``: link frames in Denavit-Hartenberg form (``Xtree`` a rotation
  about x and a translation in the x-z plane of the rotated frame): RNEA
  140n - 167 / 114n - 149, ABA 304n - 437 / 249n - 373, CRBA 11n^2 + 30n - 76
  / 8n^2 + 35n - 74.

Why the general (and DH) counts stay above the book's, per body of RNEA
(154 mul): composing ``Xup = XJ Xtree`` (12), three general Plücker transforms
of a spatial vector (``v``, ``a`` down, ``f`` up: 3 x 24), two rigid-body
inertia products ``I a``, ``I v`` in the 10-parameter form (2 x 24), ``v x* Iv``
(18), ``v x vJ`` (4).  The book's figures come from implementations
hand-specialised to revolute joints in DH frames (each transform two screw
transforms about coordinate axes, and the operations fused across the
algorithm's lines); the kernels here are written once for every joint type
and any frame, and the compiler only folds the structural zeros and ones that
the model's constants contain.  ABA's extra linear cost is mostly the
articulated-inertia transform ``X^T Ia X`` of a general symmetric 6x6 (147 mul
with the block formula of ``spatial.transform_inertia`` and the zero row and
column of ``Ia`` along the joint axis).  CRBA's quadratic term, 24 mul per pair
of bodies (12n^2), is one general force transform per pair; the book's 20
assumes DH transforms.  On real robots, whose frames are mostly axis-aligned,
the same kernels fold far more (see ``sparsedyn compile``).
"""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.codegen.trace import trace
from sparsedyn.model.joints import quat_exp
from sparsedyn.model.spatial import Transform, from_pose, quat_to_rot, rotx

FEATHERSTONE = {
    "rnea": (lambda n: 93 * n - 108, lambda n: 81 * n - 100),
    "aba": (lambda n: 224 * n - 259, lambda n: 205 * n - 248),
    "crba": (lambda n: 10 * n * n + 22 * n - 32, lambda n: 6 * n * n + 37 * n - 43),
}

# Twice the exact counts (some quadratic coefficients are halves), valid for n >= 3.
GENERAL = {
    "rnea": (lambda n: 2 * (154 * n - 182), lambda n: 2 * (126 * n - 162)),
    "aba": (lambda n: 2 * (328 * n - 473), lambda n: 2 * (270 * n - 400)),
    "crba": (lambda n: 2 * (12 * n * n + 41 * n - 97), lambda n: 2 * (9 * n * n + 44 * n - 89)),
    "minv": (lambda n: 2 * (12 * n * n + 215 * n - 437), lambda n: 23 * n * n + 291 * n - 600),
}
PLANAR = {
    "rnea": (lambda n: 2 * (25 * n - 30), lambda n: 2 * (23 * n - 32)),
    "aba": (lambda n: 2 * (54 * n - 83), lambda n: 2 * (43 * n - 73)),
    "crba": (lambda n: 5 * n * n - 11 * n + 8, lambda n: 3 * n * n + 5 * n - 14),
    "minv": (lambda n: 11 * n * n + 33 * n - 96, lambda n: 11 * n * n - 3 * n - 34),
}
DH = {
    "rnea": (lambda n: 2 * (140 * n - 167), lambda n: 2 * (114 * n - 149)),
    "aba": (lambda n: 2 * (304 * n - 437), lambda n: 2 * (249 * n - 373)),
    "crba": (lambda n: 2 * (11 * n * n + 30 * n - 76), lambda n: 2 * (8 * n * n + 35 * n - 74)),
}


def general_chain(n):
    """n revolute joints about z; every Xtree the same general rotation + translation; general inertias."""
    R0 = quat_to_rot(quat_exp(np.array([0.3, -0.5, 0.7])))
    Ic = np.array([[0.3, 0.01, -0.02], [0.01, 0.25, 0.03], [-0.02, 0.03, 0.2]])
    b = sd.ModelBuilder("general_chain")
    for i in range(1, n + 1):
        b.add_body(f"l{i}", None if i == 1 else f"l{i - 1}", sd.make_joint("revolute", (0, 0, 1)),
                   from_pose(R0, np.array([0.1, 0.2, 0.3])), mass=1.5, com=[0.1, -0.05, 0.2], rot_inertia=Ic)
    return b.build()


def dh_chain(n, alpha=0.7, a=0.3, d=0.2):
    """n revolute joints about z with Denavit-Hartenberg link frames; general inertias."""
    Ic = np.array([[0.3, 0.01, -0.02], [0.01, 0.25, 0.03], [-0.02, 0.03, 0.2]])
    b = sd.ModelBuilder("dh_chain")
    X = Transform(rotx(alpha), np.array([a, -d * np.sin(alpha), d * np.cos(alpha)]))
    for i in range(1, n + 1):
        b.add_body(f"l{i}", None if i == 1 else f"l{i - 1}", sd.make_joint("revolute", (0, 0, 1)), X,
                   mass=1.5, com=[0.1, -0.05, 0.2], rot_inertia=Ic)
    return b.build()


def _divisions(name, n):
    return n - 1 if name in ("aba", "minv") else 0        # the leaf's D = S^T I S is a model constant


@pytest.mark.parametrize("name", ["rnea", "aba", "crba"])
@pytest.mark.parametrize("n", [2, 3, 5, 8, 12])
def test_planar_chain_at_or_below_featherstone(name, n):
    f = trace(sd.serial_chain(n), name).flops()
    mul, add = FEATHERSTONE[name]
    assert f["mul"] <= mul(n) and f["add"] <= add(n)
    assert f["div"] == _divisions(name, n)
    assert f["cos"] == n - 1                    # the first joint's rotation about gravity folds away
    # H of a planar pair depends on cos(q2) only; from three links on sin(q_i + q_j) appears.
    assert f["sin"] == (n - 1 if name != "crba" or n > 2 else 0)


@pytest.mark.parametrize("name", ["rnea", "aba", "crba", "minv"])
@pytest.mark.parametrize("n", [3, 4, 7, 10])
def test_planar_chain_exact_counts(name, n):
    f = trace(sd.serial_chain(n), name).flops()
    mul, add = PLANAR[name]
    assert (2 * f["mul"], 2 * f["add"]) == (mul(n), add(n))
    assert f["div"] == _divisions(name, n)


@pytest.mark.parametrize("name", ["rnea", "aba", "crba", "minv"])
@pytest.mark.parametrize("n", [3, 4, 7, 10])
def test_general_chain_exact_counts(name, n):
    f = trace(general_chain(n), name).flops()
    mul, add = GENERAL[name]
    assert (2 * f["mul"], 2 * f["add"]) == (mul(n), add(n))
    assert f["div"] == _divisions(name, n)
    assert f["sin"] == f["cos"] == (n if name == "rnea" or name == "aba" else n - 1)


@pytest.mark.parametrize("name", ["rnea", "aba", "crba"])
@pytest.mark.parametrize("n", [3, 6, 9])
def test_dh_chain_exact_counts(name, n):
    f = trace(dh_chain(n), name).flops()
    mul, add = DH[name]
    assert (2 * f["mul"], 2 * f["add"]) == (mul(n), add(n))


def test_crba_quadratic_coefficients():
    """CRBA's n^2 coefficients (half the cost of one pair of bodies): 12 mul / 9 add on a general chain,
    11 / 8 with DH frames, 2.5 / 1.5 on the planar chain, against the book's 10 / 6."""
    for table, (cm, ca) in ((GENERAL, (12, 9)), (DH, (11, 8)), (PLANAR, (2.5, 1.5))):
        mul, add = table["crba"]
        n = 50      # the second difference of a quadratic is twice its leading coefficient (tables hold 2x counts)
        assert mul(n + 1) - 2 * mul(n) + mul(n - 1) == 4 * cm
        assert add(n + 1) - 2 * add(n) + add(n - 1) == 4 * ca
