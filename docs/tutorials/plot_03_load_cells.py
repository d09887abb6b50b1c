"""
Load cells under both feet: an ill-posed problem, proved before any data
========================================================================

A humanoid standing on two feet with three-axis load cells under each sole
(the moments about the sole's x and y axes and the normal force) seems well
instrumented.  The offline phase says otherwise, before any data: one
direction of the contact wrenches is seen by no sensor.  This is the first
case study of Nori (2017); here is the verdict, what it means, and what to add.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd
from sparsedyn.model.sensors import LOAD_CELLS, ContactLoad
from sparsedyn.sparse.assembly import SystemPattern

model = sd.humanoid()
contacts = ["l_sole", "r_sole"]
cells = [ContactLoad(f"{f}_cells", f, LOAD_CELLS) for f in contacts]
prob = sd.EstimationProblem(model, cells, contacts)
verdict = prob.verdict()
print(verdict)
assert verdict.kind == "rank-deficient" and verdict.deficiency == 1

# %%
# The finding
# -----------
# The missing direction is a pair of equal and opposite horizontal forces at
# the two feet: the robot can push its feet apart (or together) without any
# load cell noticing, and the joint torques in the legs depend on it.  No
# amount of data fixes this: ``compile()`` refuses with the verdict.
try:
    prob.analyze()
    raise AssertionError("an ill-posed problem must be refused")
except sd.IllPosedError as e:
    print("refused:", str(e).splitlines()[0])

# %%
# What to add
# -----------
# A six-axis force/torque sensor in one ankle sees the horizontal force of
# that foot, which removes the unobservable direction.
fixed = sd.EstimationProblem(model, cells + [sd.ForceTorque("l_ankle_ft", "l_ankle_roll")], contacts)
print(fixed.verdict())
assert fixed.verdict().ok

# %%
# The picture: the sparse system and its block-triangular form, before and
# after adding the sensor (the structural rank deficiency shows as a block
# with more unknowns than equations).
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, p, title in ((axes[0], prob, "load cells only"), (axes[1], fixed, "load cells + ankle F/T")):
    pat = SystemPattern(p.sparse_problem())
    A = np.zeros((pat.nrows, pat.n))
    A[pat.rows, pat.cols] = 1
    ax.spy(A, markersize=0.5)
    ax.set_title(f"{title}: {pat.nrows} x {pat.n}")
fig.tight_layout()
