"""Shared cases of the recording tests (tests/estimation, tests/identification, tests/interop,
tests/test_cli_recordings.py): chain7 with a least-squares sensor set, states and their measurements."""

from pathlib import Path

import numpy as np
import pytest

import sparsedyn as sd

SRC = str(Path(sd.__file__).resolve().parents[1])

#: chain7 (the CLI's built-in 7-link chain) with known accelerations, a redundant force/torque sensor and a
#: joint torque sensor: a least-squares problem, so the residuals are written too.
SENSORS = """
[[sensor]]
type = "force_torque"
name = "ft2"
joint = "joint2"
std = 0.1

[[sensor]]
type = "joint_torque"
name = "tau4"
joints = ["joint4"]
std = 0.05
"""


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """``(model, problem, sensor file)`` of chain7 with :data:`SENSORS` (a fixture: import it)."""
    from sparsedyn.estimation import problem_from_file
    from sparsedyn.model.builders import builtin
    d = tmp_path_factory.mktemp("chain")
    (d / "chain.toml").write_text(SENSORS)
    model = builtin("chain7")
    return model, problem_from_file(model, d / "chain.toml"), d / "chain.toml"


def states(problem, n, block=2000, seed=0):
    """``(q, v, a, y)`` of ``n`` states: ``block`` random states repeated (cheap to make, still every
    state solved on its own)."""
    rng = np.random.default_rng(seed)
    m = problem.model
    q = rng.uniform(-2, 2, (block, m.nq))
    v, a = rng.normal(size=(2, block, m.nv))
    y, _ = problem.measurements(q, v, a)
    reps = -(-n // block)
    return tuple(np.tile(x, (reps, 1))[:n] for x in (q, v, a, y))


def leftovers(d: Path):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))
