"""The pieces of a point-contact step's derivatives as a kernel (sparsedyn.contact.point_partials): its rows
are contact_problem's, their derivative central differences of them, H^-1 the inverse of CRBA's matrix, RNEA's
derivatives rnea_derivatives', on the default native road and on NumPy's; a contact that is not a point is
refused, naming it."""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound


def _state():
    model = sd.humanoid()
    rng = np.random.default_rng(9)
    q = model.random_configuration(rng)
    v, a, dq = rng.normal(size=(3, model.nv))
    feet = [f.name for f in model.frames if "foot" in f.name][:2] or [model.frames[-1].name]
    return model, q, v, a, dq, [sd.Contact(f, "3d") for f in feet]


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_the_pieces_are_their_functions_and_differences(backend):
    model, q, v, a, dq, contacts = _state()
    with sd.use_backend(backend, deterministic=True):
        J, gap, Minv, Tq, Tv, dJ, Dq, Dd = sd.contact_step_partials(model, q, v, a, dq, model.gravity, contacts)
    P = sd.contact_problem(model, q, v, np.zeros(model.nv), contacts)
    H = sd.crba(model, q)
    bound = rounding_bound(model.nv + model.nbodies, np.linalg.cond(H))
    assert rel_err(J, P.J) <= rounding_bound(model.nbodies) and rel_err(gap, P.gap) <= rounding_bound(model.nbodies)
    assert rel_err(Minv @ H, np.eye(model.nv)) <= bound
    want = sd.rnea_derivatives(model, q, v, a)
    assert rel_err(Tq, want[0]) <= bound and rel_err(Tv, want[1]) <= bound
    assert all(rel_err(x, y) <= rounding_bound(8) for x, y in zip((Dq, Dd), sd.integrate_derivatives(model, q, dq)))
    # dJ/dq on the tangent space: central differences (truncation h^2, rounding eps / h: 1e-6 of J's size)
    h = 1e-5
    fd = np.stack([(sd.contact_problem(model, sd.integrate(model, q, e), v, np.zeros(model.nv), contacts).J
                    - sd.contact_problem(model, sd.integrate(model, q, -e), v, np.zeros(model.nv), contacts).J) / (2 * h)
                   for e in np.eye(model.nv) * h], -1)
    assert rel_err(dJ, fd) <= 1e-6


def test_a_contact_that_is_not_a_point_is_refused_naming_it():
    model, q, v, a, dq, contacts = _state()
    for backend in ("native", "numpy"):
        with sd.use_backend(backend, deterministic=True), pytest.raises(ValueError, match="must be point contacts"):
            sd.contact_step_partials(model, q, v, a, dq, model.gravity, [sd.Contact(contacts[0].frame, "6d")])
