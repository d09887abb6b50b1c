"""The derivatives routine writing the six blocks of the result (sparsedyn.contact.derivative_blocks_native):
the routine's own results (its padded ``[dv+, dq+]``, :func:`state_derivatives_call`) cut into their
column blocks, bit for bit, on the pressed box (stick, position correction), the sliding box (the
general solve) and the two-body contact; a NaN in the mode equations (an input the fast path declines:
its ctypes fallback) gives NaN blocks and the code 2, as the routine says."""

import numpy as np

from test_friction_derivatives import DT
from test_scene_derivatives import _box_pressed_into_table
from test_state_derivatives_native import _pieces, fast_path_cases
from sparsedyn.contact.derivative_blocks_native import blocks_call
from sparsedyn.contact.state_derivatives_native import state_derivatives_call


def _blocks(out, nv):
    return [out[h // 3, :, (h % 3) * nv:(h % 3 + 1) * nv] for h in range(6)]


def test_the_blocks_are_the_routines():
    for model, rows, state, gap, weights, correction, modes in fast_path_cases():
        nv, ns = model.nv, len(gap)
        weights = np.ascontiguousarray(weights)
        out, rc = state_derivatives_call(nv, ns, DT)(rows, state, weights, correction)
        call, par = blocks_call(nv, ns, DT)
        got = call(rows, state, weights, correction, par)
        assert len(got) == 7 and got[6].tolist() == rc.tolist() == [0.0]
        for g, r in zip(got[:6], _blocks(out, nv)):
            assert g.shape == (nv, nv) and g.flags.c_contiguous and np.array_equal(g, r)
    model, rows, state, gap, weights, correction, modes = _pieces(_box_pressed_into_table)
    nv, m = model.nv, len(rows)
    rows = rows.copy()
    rows[4, 5 * nv + m + 1] = np.nan                       # (A's entry of K[4, 4])
    call, par = blocks_call(nv, len(gap), DT)
    got = call(rows, state, np.ascontiguousarray(weights), correction, par)
    assert got[6].tolist() == [2.0] and np.isnan(got[0]).all()
