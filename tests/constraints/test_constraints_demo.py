"""The constraints section of ``sparsedyn demo``."""

from sparsedyn.constraints import EXAMPLES, constraints_demo


def test_constraints_demo_reports_every_example():
    text = constraints_demo()
    for name in EXAMPLES:
        assert name in text
    assert "over-actuated" in text and "fully actuated" in text
    assert "redundant rows: loop.z" in text
    # Every KKT error printed is tiny.
    errs = [float(line.split()[-1]) for line in text.splitlines() if line.strip().split(" ")[0] in EXAMPLES]
    assert len(errs) == len(EXAMPLES) and max(errs) < 1e-9
