"""The results of a contact step (sparsedyn.contact.friction_problem): one state's ContactStep computes
its modes when first read and holds them wherever it is read."""

import numpy as np

import sparsedyn as sd
from test_friction import TOL, _arrays


def test_one_states_step_holds_its_modes_wherever_it_is_read():
    """One state's step computes its modes when first read: unpacked, indexed, sliced, as a dict,
    replaced, copied, pickled and printed it holds the definition's modes, a ContactStep; laid out in
    slots (contact ``i`` in slot ``index[i]``) its impulses and modes are those of the contacts' slots."""
    import copy
    import pickle
    from sparsedyn.contact.friction import _result
    lam = [[0.1, 0, 1e-8], [0.1, 0, 2e-8], [0.0, 0, 1.0], [0, 0, 1.0], [0, 0, 0]]
    u = [[1.0, 0, 0], [1.0, 0, 0], [6e-7, 8e-7, 0], [6e-7, 8.1e-7, 0], [0, 0, 0]]
    want = ["open", "slide", "stick", "slide", "open"]
    s = _result("contact_step", "admm", TOL, _arrays(np.zeros(6), lam, u))
    q, v, impulses, modes, residuals, iterations = s
    assert isinstance(s, sd.ContactStep) and modes.tolist() == want and s[3] is s.modes is modes
    assert s[-3].tolist() == want and s[2:4][1].tolist() == want and s._asdict()["modes"].tolist() == want
    assert s._replace(iterations=np.array(3)).modes.tolist() == want and int(s._replace(q=1)[0]) == 1
    assert copy.deepcopy(s).modes.tolist() == want and pickle.loads(pickle.dumps(s)).modes.tolist() == want
    assert repr(s).startswith("ContactStep(q=") and "modes=array(['open', 'slide', 'stick', 'slide', 'open']" in repr(s)
    index = np.array([4, 0, 2])                   # three contacts in slots 4, 0 and 2 of five
    slotted = _result("contact_step", "admm", TOL, _arrays(np.zeros(6), lam, u), index)
    assert slotted.modes.tolist() == ["open", "open", "stick"]
    assert slotted.impulses.tolist() == [lam[4], lam[0], lam[2]]
