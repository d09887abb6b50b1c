"""Names from a model never reach the generated C source; hostile names compile and run."""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.codegen.cemit import emit_program, emit_unit
from sparsedyn.codegen.trace import DEFAULT_KERNELS, trace

pytestmark = pytest.mark.usefixtures("compile_cache")

EVIL = ['a"b', "back\\slash", "end */ int x = 1; /*", "new\nline", "#include <stdio.h>", "quote'", "naïve ✓",
        "??/", "\\\n", "MARKER_body"]


def hostile_model():
    b = sd.ModelBuilder('model "*/ \\ \n name')
    parent = None
    for k, name in enumerate(EVIL):
        b.add_body(name, parent, sd.make_joint(["revolute", "prismatic", "spherical"][k % 3], (0, 1, 1)),
                   None if parent is None else sd.spatial.xlt(np.array([0.2, 0.0, 0.1])),
                   mass=1.0 + k, com=[0.1, 0.0, 0.0], rot_inertia=np.eye(3) * 0.01,
                   joint_name=f"joint {name} MARKER_joint */")
        parent = name
    return b.build()


def test_names_never_reach_the_source():
    m = hostile_model()
    for name in DEFAULT_KERNELS:
        for variant in ("single", "batch"):
            src = emit_unit(emit_program(trace(m, name), name, variant))
            for bad in ("MARKER", "*/ int", "\\slash", "stdio", "naïve", "model \""):
                assert bad not in src
            assert src.isascii()


def test_kernel_identifiers_are_checked():
    p = trace(sd.serial_chain(2), "rnea")
    for bad in ("rnea */", "x;y", "Rnea", "rnea\n"):
        with pytest.raises(ValueError):
            emit_program(p, bad)
    with pytest.raises(ValueError):
        emit_unit([], key='abc"); system("rm')


def test_hostile_names_compile_and_run(rng):
    m = hostile_model()
    k = sd.compile(m)
    q = m.random_configuration(rng)
    v, a = rng.normal(size=m.nv), rng.normal(size=m.nv)
    assert k.compiled
    assert rel_err(k.rnea(q, v, a), sd.rnea(m, q, v, a)) < rounding_bound(m.nv)
    assert rel_err(k.minv(q), sd.minv(m, q)) < rounding_bound(m.nv, np.linalg.cond(sd.crba(m, q)).max())
