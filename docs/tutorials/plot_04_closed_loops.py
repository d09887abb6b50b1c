"""
A four-bar and a delta robot
============================

Closed kinematic loops as holonomic constraints on a tree: the constrained
inverse dynamics of an actuated delta robot, and an unactuated four-bar
falling under gravity, simulated with projection so the loop never drifts.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd
from sparsedyn import constraints as sc

delta = sc.delta_robot()
cs = delta.constraints
print(delta.model)
print("constraints:", cs.m, " degrees of freedom:", delta.dof)
# 12 joint velocities, 9 independent loop-closure rows: 3 degrees of freedom, one per motor
assert delta.model.nv - np.linalg.matrix_rank(cs.jacobian(delta.q0)) == delta.dof == len(delta.actuated) == 3
rng = np.random.default_rng(1)
q, v, a = delta.random_state(rng)
res = sd.constrained_inverse_dynamics(cs, q, v, a, actuated=delta.actuated)
print("motor torques u =", np.round(res.u, 4), " regime:", res.regime)
assert res.regime == "fully actuated" and res.u.shape == (3,)
fwd = sd.constrained_forward_dynamics(cs, q, v, delta.B @ res.u)
print("forward dynamics recovers a: max error", np.abs(fwd.a - a).max())
assert np.abs(fwd.a - a).max() < 1e-8 * max(1.0, np.abs(a).max())      # rounding, times the conditioning

# %%
# The four-bar, released from rest
# --------------------------------
bar = sc.four_bar()
traj = sc.simulate(bar.constraints, bar.q0, np.zeros(bar.model.nv), 1.0, 0.01)
E = np.array([sd.mechanical_energy(bar.model, q, v) for q, v in zip(traj.q, traj.v)])
# an unactuated, frictionless mechanism keeps its energy; the projection keeps g(q) = 0
assert np.abs(E - E[0]).max() < 1e-6 * max(1.0, np.abs(E).max())
assert np.max(traj.position_violation) < 1e-9
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
ax1.plot(traj.t, traj.q)
ax1.set(xlabel="time (s)", ylabel="joint angles (rad)", title="four-bar, unactuated")
ax2.semilogy(traj.t, np.maximum(traj.position_violation, 1e-17), label="max |g(q)|")
ax2.semilogy(traj.t, np.maximum(np.abs(E - E[0]), 1e-17), label="|E - E(0)| (J)")
ax2.set(xlabel="time (s)", title="drift and energy")
ax2.legend()
fig.tight_layout()

# %%
# The four-bar in the browser viewer
# ----------------------------------
# :class:`sparsedyn.Viewer` serves the model in a web page (``viewer.url``); its animation of the
# simulated motion is one standalone page, embedded here (``viewer.record("four_bar.html", ...)``
# writes the same page to a file).  The four-bar has no shapes, so it is drawn as a skeleton: a ball
# per body and a rod to each child joint.
viewer = sd.Viewer(bar.model, verbose=False, compiled=False)
animation = viewer.animation(traj.q, 0.01)
viewer.close()
animation
