"""Flop counts from the IR against Featherstone's published counts (RBDA Table 10.1).

Featherstone counts a serial chain of ``n`` revolute joints:

=========  ====================  ====================
algorithm  multiplications       additions
=========  ====================  ====================
RNEA       93n - 108             81n - 100
ABA        224n - 259            205n - 248
CRBA       10n^2 + 22n - 32      6n^2 + 37n - 43
=========  ====================  ====================

Two chains of revolute joints are measured here, both with the joint axis the
z axis of the joint frame (as in the book):

* ``serial_chain(n)``: parallel axes, each joint frame displaced along x from
  the previous one (a planar chain).  The tracer folds every structural zero of
  this geometry, and the counts are far *below* the book's, for every n >= 2.

* ``general_chain(n)``: every ``Xtree`` a general rotation and translation,
  general inertias.  Here the counts are *above* the book's, exactly
  RNEA 154n - 182 / 128n - 162, ABA 545n - 949 / 462n - 800 (plus n - 1 divisions:
  the leaf's D is a constant),
  CRBA 12n^2 + 302n - 711 / 9n^2 + 262n - 571 (n >= 4).  The reasons, all in
  how the NumPy kernels are written (the compiler traces them as they are, it
  does not rewrite the algebra):

  1. inertias are dense 6x6 constant matrices: ``I v`` costs 24 mul / 18 add
     (its structural nonzeros) where the book's 10-parameter (m, c, Ic) form
     with its rules of spatial arithmetic is cheaper;
  2. ``Xup = XJ Xtree`` is composed explicitly (a 3x3 product) and then
     applied as a general Plücker transform, where the book applies the
     constant ``Xtree`` and the 4-nonzero ``rotz`` one after the other;
  3. ``transform_inertia`` (ABA's and CRBA's ``X^T I X``) multiplies two dense
     6x6 matrices by the 6x6 motion transform, hundreds of flops per body where
     the book's dedicated formula needs a few dozen: this is why ABA's and
     CRBA's linear terms are 2.4x and 14x the book's.  CRBA's quadratic term
     (12 vs 10 mul per pair of bodies) is ``apply_force_transpose`` on a
     general transform.

An efficient ``spatial.transform_inertia`` would bring ABA, CRBA and Carpentier's
inverse much closer to the book; the numbers here pin the current state so that
any change shows up.
"""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.codegen.trace import trace
from sparsedyn.joints import quat_exp
from sparsedyn.spatial import from_pose, quat_to_rot

FEATHERSTONE = {
    "rnea": (lambda n: 93 * n - 108, lambda n: 81 * n - 100),
    "aba": (lambda n: 224 * n - 259, lambda n: 205 * n - 248),
    "crba": (lambda n: 10 * n * n + 22 * n - 32, lambda n: 6 * n * n + 37 * n - 43),
}

GENERAL = {     # exact counts measured on general_chain(n), n >= 4 (see the module docstring)
    "rnea": (lambda n: 154 * n - 182, lambda n: 128 * n - 162),
    "aba": (lambda n: 545 * n - 949, lambda n: 462 * n - 800),
    "crba": (lambda n: 12 * n * n + 302 * n - 711, lambda n: 9 * n * n + 262 * n - 571),
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


@pytest.mark.parametrize("name", ["rnea", "aba", "crba"])
@pytest.mark.parametrize("n", [2, 3, 5, 8, 12])
def test_planar_chain_at_or_below_featherstone(name, n):
    f = trace(sd.serial_chain(n), name).flops()
    mul, add = FEATHERSTONE[name]
    assert f["mul"] <= mul(n) and f["add"] <= add(n)
    assert f["div"] == (n - 1 if name == "aba" else 0)     # the leaf's D = S^T I S is a model constant
    assert f["sin"] == f["cos"] == n - 1        # the first joint's rotation about gravity folds away


@pytest.mark.parametrize("name", ["rnea", "aba", "crba"])
@pytest.mark.parametrize("n", [4, 7, 10])
def test_general_chain_exact_counts(name, n):
    f = trace(general_chain(n), name).flops()
    mul, add = GENERAL[name]
    assert (f["mul"], f["add"]) == (mul(n), add(n))
    assert f["div"] == (n - 1 if name == "aba" else 0)     # the leaf's D = S^T I S is a model constant


def test_planar_chain_formulas():
    """The planar chain's counts are exact affine (quadratic for CRBA) formulas in n."""
    for n in range(5, 11):
        r, a, c = (trace(sd.serial_chain(n), k).flops() for k in ("rnea", "aba", "crba"))
        assert (r["mul"], r["add"]) == (25 * n - 30, 25 * n - 34)
        assert (a["mul"], a["add"]) == (85 * n - 156, 71 * n - 130)
        assert (2 * c["mul"], 2 * c["add"]) == (5 * n * n + 59 * n - 186, 3 * n * n + 53 * n - 136)
