"""The compiled step skips the slots it does not use (:mod:`sparsedyn.codegen.emit_bounds`): built for
``N`` data slots, a step whose contacts fill the first ``n`` (a scene's layout: the rest free, open,
zero joint weights) runs its block products over those alone, and still equals its own program's
interpreter (every product whole) bit for bit, keeps the free slots' impulses at zero, and solves the
same problem as a step built for exactly ``n`` slots."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.data_slots import empty_data_slots
from sparsedyn.contact.friction_kernel import _step_program, contact_step_kernel
from sparsedyn.contact.friction_problem import DATA_SLOT, slot_weights
from test_friction import DT, TOL, _solo_case, _solution_bound

N = 8
SETTINGS = np.array([DT, TOL, 1000.0, 1e4, 0.005])


def _slots(model, feet, q, ns, lifted=()):
    """``ns`` data slots (ns, 8 + nv) of solo12's feet at ``q`` on the ground (the feet ``lifted`` against
    a plane half a metre below: open), in the first slots, the rest free."""
    data = empty_data_slots(model, ns)
    for i, c in enumerate(feet):
        k = model.frame(c.frame)
        data[i, :4] = [c.friction, *sd.frame_placement(model, q, k)[1]]
        data[i, 4:8] = (0.0, 0.0, 1.0, -0.5 if i in lifted else 0.0)
        data[i, 8:] = slot_weights(model, model.frames[k].body)
    return data


@pytest.mark.parametrize("state, lifted", [(0, ()), (2, ()), (6, ()), (11, (3,)), (16, (2, 3))])
def test_a_step_in_fewer_slots_than_built_equals_its_interpreter_bit_for_bit(state, lifted):
    """solo12's four feet in the first four of eight data slots (the last ones lifted: open contacts
    after the last closed one, which the bound leaves out too): the compiled step, whose products skip
    the slots past the last closed contact, equals the interpreter of its own program (the products
    whole) in every output bit for bit, and the free and open slots' impulses, velocities and
    position correction are zero."""
    model, feet, q0, V, T = _solo_case()
    frames = (DATA_SLOT,) * N
    prog = _step_program(model, {"frames": frames}, ())
    bounded = [b for p in prog.programs for b in p.blocks if b.live is not None]
    assert len(bounded) > 20                                      # init, factorisation, ADMM, polish, checks
    args = [q0, V[state], T[state], SETTINGS, np.zeros((N, 3)), _slots(model, feet, q0, N, lifted)]
    with sd.use_backend("native", deterministic=True):
        got = contact_step_kernel(model, *args, frames=frames)
    ref = prog.run(args)[0]
    for a, r in zip(got, ref):
        assert np.array_equal(np.ravel(a), np.ravel(r))
    out = [i for i in range(N) if i >= len(feet) or i in lifted]
    assert not got.impulses[out].any() and not got.correction[out].any()
    assert not got.velocities[out][:, :2].any()


@pytest.mark.parametrize("state", [0, 2, 6, 11])
def test_a_step_in_fewer_slots_than_built_solves_the_step_of_exactly_its_slots(state):
    """The same feet in four of eight slots and in a step built for exactly four: the same contact
    problem, solved to the tolerance by each (their iterations may differ: the polish's schedule
    depends on the rows), so ``v+`` agrees within the solution bound of the tolerance and the
    impulses of the used slots are the four-slot step's to that bound through ``G``."""
    model, feet, q0, V, T = _solo_case()
    n = len(feet)
    with sd.use_backend("native", deterministic=True):
        big = contact_step_kernel(model, q0, V[state], T[state], SETTINGS, np.zeros((N, 3)),
                                  _slots(model, feet, q0, N), frames=(DATA_SLOT,) * N)
        own = contact_step_kernel(model, q0, V[state], T[state], SETTINGS, np.zeros((n, 3)),
                                  _slots(model, feet, q0, n), frames=(DATA_SLOT,) * n)
    assert big.report[4] == 1.0 and own.report[4] == 1.0                     # both converged
    bound = _solution_bound(model, q0, V[state], T[state], feet)
    assert np.abs(big.v_next - own.v_next).max() <= bound
    assert np.abs(big.q_next - own.q_next).max() <= DT * bound + 4 * np.finfo(float).eps * np.abs(own.q_next).max()
