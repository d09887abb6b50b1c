"""Iterative kernels (sparsedyn.symbolic.loop): stages steered by their flags, against the same
iteration written as a plain Python loop."""

import math

import numpy as np
import pytest

from sparsedyn import backend as bk
from sparsedyn.symbolic.loop import LoopProgram, next_stage, trace_loop


def _step(x):
    return 0.5 * (1.0 + bk.copysign(1.0, x))


def newton_loop(cap=1000):
    """sqrt(a) by Newton's iteration from x = a: stage 0 (re)starts (counts restarts), stage 1 iterates
    until |x_new - x| <= 1e-15 x_new; after two iterations of the first start it jumps back to
    stage 0 once (flag -1), so both directions of the flag are used."""

    def init(a):
        return np.array([a[0]]), np.array([a[0], 0.0, 0.0])          # K = [a], S = [x, iterations, restarts]

    def start(a, K, S):
        return np.array([K[0], 0.0, S[2] + 1.0]), 1.0

    def newton(a, K, S):
        x, c, r = S
        xn = 0.5 * (x + K[0] / x)
        c = c + 1.0
        done = _step(1e-15 * xn - bk.copysign(xn - x, 1.0))
        back = _step(c - 2.0) * _step(1.5 - r)                       # once, after two iterations
        return np.array([xn, c, r]), done + (1.0 - done) * (-back)

    def finish(a, K, S):
        return S[:1], S[1:]

    return trace_loop("newton", [("a", (1,))], [("x", (1,)), ("counts", (2,))], init, [start, newton], finish, cap)


def python_newton(a):
    x, c = a, 0
    for restart in (1, 2):
        x, c = a, 0
        while True:
            xn = 0.5 * (x + a / x)
            c += 1
            done = abs(xn - x) <= 1e-15 * xn
            x = xn
            if done or (restart == 1 and c >= 2):
                break
        if done and restart == 1:
            return x, c, 1
    return x, c, 2


def test_stages_run_as_their_flags_say():
    prog = newton_loop()
    assert isinstance(prog, LoopProgram) and prog.sizes == (1, 3) and len(prog.stages) == 2
    a = np.array([[2.0], [9.0], [1e6], [0.25]])
    x, counts = prog.evaluate([a])
    for k, ak in enumerate(a[:, 0]):
        xr, c, r = python_newton(ak)
        assert x[k, 0] == xr and counts[k].tolist() == [c, r]
        assert abs(x[k, 0] - math.sqrt(ak)) <= 2 * np.spacing(math.sqrt(ak))
    # one state: the stage runs are 1 (start) + 2 (first try) + 1 (restart) + the iterations of the second try
    _, runs = prog.run([a[2]])
    assert runs == 1 + 2 + 1 + int(counts[2, 0])


def test_the_cap_ends_a_loop_that_never_stops():
    prog = newton_loop(cap=5)
    _, counts = prog.evaluate([np.array([1e6])])
    assert counts.tolist() == [1.0, 2.0]        # start, 2 iterations, restart (count 0), 1 iteration: 5 runs


def test_next_stage_rule():
    assert [next_stage(2, f) for f in (0.0, 1.0, 2.2, -1.0, -7.0, 0.4, np.nan)] == [2, 3, 4, 1, 0, 2, 2]


def test_an_iterative_kernel_has_no_derivative_program():
    from sparsedyn.symbolic.ad import inline, jacobian_program
    with pytest.raises(TypeError, match="iterative kernel"):
        jacobian_program(newton_loop(), [0])
    with pytest.raises(TypeError, match="iterative kernel"):
        inline(newton_loop(), [np.ones(1)])


def test_init_must_give_two_blocks():
    with pytest.raises(ValueError, match="init must return"):
        trace_loop("bad", [("a", (1,))], [("x", (1,))], lambda a: (a,), [], lambda a, K, S: a)
