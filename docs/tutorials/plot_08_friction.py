"""
Touching the world: a quadruped dropped on the ground, a box sliding to rest, a thousand robots pushed
======================================================================================================

One-sided frictional contact (:func:`sparsedyn.contact_step`): solo12 is dropped from 5 cm onto its
four feet and settles under a joint PD controller, its contact impulses and modes plotted over time;
a box slides to rest at the rate Coulomb's law predicts; a batch of 1,000 quadrupeds is pushed at
random in one vectorised call; and :func:`sparsedyn.contact_step_derivatives` gives the derivatives
of a step for optimisation.  Every number printed is also asserted.
"""

# %%
# Solo12 dropped from 5 cm
# ------------------------
# The feet are point contacts with friction 0.7 against the ground z = 0.  The robot starts with its
# feet 5 cm above the ground; a PD controller holds the joints at the standing posture on top of
# the torques that hold it (gravity compensation with the weight shared by the feet).
import os

import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd
from sparsedyn.interop import example_robot_data_dir

path = os.path.join(example_robot_data_dir(), "solo_description", "robots", "solo12.urdf")
model = sd.load_urdf(path, floating_base=True)
k = sd.compile(model)                         # the per-state arithmetic of each step, compiled
FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
feet = [sd.Contact(f, "3d", friction=0.7) for f in FEET]
q_stand = np.zeros(model.nq)
q_stand[6] = 1.0
q_stand[7:] = np.tile([0.0, 0.8, -1.6], 4)
q_stand[2] = -min(sd.frame_placement(model, q_stand, f)[1][2] for f in FEET)

g = sd.generalized_gravity(model, q_stand)
J = np.vstack([sd.frame_jacobian(model, q_stand, f, "local_world_aligned")[3:] for f in FEET])
f_feet = np.linalg.lstsq(J[:, :6].T, g[:6], rcond=None)[0]       # foot forces that carry the base
hold = g - J.T @ f_feet                                           # zero on the (unactuated) base


def controller(t, q, v):
    pd = 5.0 * (q_stand[7:] - q[..., 7:]) - 0.2 * v[..., 6:]          # one state or a batch
    return hold + np.concatenate([np.zeros(v.shape[:-1] + (6,)), pd], -1)


dt, steps = 1e-3, 500
q0 = q_stand + np.array([0, 0, 0.05] + [0] * (model.nq - 3))
R = sd.rollout(k, q0, np.zeros(model.nv), controller, feet, dt, steps)
t = dt * np.arange(1, steps + 1)
feet_z = np.stack([sd.frame_placement(model, R.q, f)[1][:, 2] for f in FEET], 1)
penetration = max(0.0, -feet_z.min())
touchdown = t[np.argmax((R.impulses[..., 2] > 0).any(1))]
feet_xy = np.stack([sd.frame_placement(model, R.q, f)[1][:, :2] for f in FEET], 1)
drift = np.abs(feet_xy[-200:] - feet_xy[-200]).max()            # the last 0.2 s, standing
print(f"first foot impulse at t = {touchdown:.3f} s (the held legs reach down while the robot falls)")
print(f"deepest foot penetration {penetration * 1e3:.4f} mm; feet drift over the last 0.2 s {drift:.2e} m")
print("final modes", R.modes[-1].tolist(), "; weight carried",
      round(R.impulses[-1, :, 2].sum() / dt, 2), "N of", round(9.81 * model.total_mass, 2), "N")
assert penetration <= 1e-4 and drift <= 1e-6
assert (R.modes[-1] == "stick").all()
assert abs(R.impulses[-1, :, 2].sum() / dt - 9.81 * model.total_mass) <= 0.01 * 9.81 * model.total_mass

fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
for j, f in enumerate(FEET):
    ax1.plot(t, R.impulses[:, j, 2] / dt, label=f)
ax1.set(ylabel="normal force (N)", title="solo12 dropped from 5 cm: normal impulse / dt per foot")
ax1.legend(ncol=4, fontsize="small")
code = {"open": 0, "slide": 1, "stick": 2}
for j, f in enumerate(FEET):
    ax2.plot(t, np.vectorize(code.get)(R.modes[:, j]) + 0.06 * j, drawstyle="steps-post", label=f)
ax2.set(xlabel="time (s)", yticks=[0, 1, 2], yticklabels=list(code), title="contact modes")
plt.tight_layout()

# %%
# A box sliding to rest
# ---------------------
# A box of 2 kg on its four corners (friction 0.4) launched at 1 m/s loses ``mu g dt`` of speed per
# step and stops after ``v0 / (mu g)`` = 0.255 s, then stays stopped.
h, m, mu = 0.1, 2.0, 0.4
b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=m,
                                    rot_inertia=np.eye(3) * m * (2 * h) ** 2 / 6)
box = b.add_frame("box", "box").build()
corners = [sd.Contact("box", "3d", friction=mu, point=(x, y, -h), name=f"c{i}")
           for i, (x, y) in enumerate([(-h, -h), (h, -h), (-h, h), (h, h)])]
B = sd.rollout(box, np.array([0, 0, h, 0, 0, 0, 1.0]), np.array([0, 0, 0, 1.0, 0, 0]), np.zeros(6), corners,
               dt, 400)
speed = B.v[:, 3]
stop = dt * np.argmax(speed <= 1e-9)
print(f"the box stops after {stop:.3f} s (v0 / (mu g) = {1.0 / (mu * 9.81):.3f} s) and slides "
      f"{B.q[-1, 0]:.4f} m (v0^2 / (2 mu g) = {1.0 / (2 * mu * 9.81):.4f} m)")
assert abs(stop - 1.0 / (mu * 9.81)) <= 2 * dt
assert abs(B.q[-1, 0] - 1.0 / (2 * mu * 9.81)) <= 2 * dt * 1.0
assert np.abs(B.v[-50:]).max() <= 1e-8

fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(dt * np.arange(len(speed)), speed, label="simulated")
ax.plot(dt * np.arange(len(speed)), np.maximum(1.0 - mu * 9.81 * dt * np.arange(len(speed)), 0), "--",
        label="1 - mu g t")
ax.set(xlabel="time (s)", ylabel="speed (m/s)", title="a box sliding to rest (mu = 0.4)")
ax.legend()

# %%
# A thousand quadrupeds pushed at random
# --------------------------------------
# A batch of states is one call: 1,000 standing solo12 get a random horizontal kick of the base (up
# to 0.5 m/s) and are simulated together (the per-state kernel runs compiled over the batch, the
# contact solver is vectorised over it).  Whether a robot keeps its feet depends on the kick.
N = 1000
rng = np.random.default_rng(0)
V0 = np.zeros((N, model.nv))
kick = rng.uniform(0, 0.5, N)
angle = rng.uniform(0, 2 * np.pi, N)
V0[:, 3], V0[:, 4] = kick * np.cos(angle), kick * np.sin(angle)
Q0 = np.tile(q_stand, (N, 1))
P = sd.rollout(k, Q0, V0, controller, feet, dt, 10)
slid = (P.modes == "slide").any(axis=(0, 2))
print(f"{N} robots, 10 steps: {slid.sum()} of them slid a foot; the slide needs a kick of at least "
      f"{kick[slid].min() if slid.any() else np.nan:.2f} m/s")
assert P.q.shape == (11, N, model.nq) and np.isfinite(P.q).all()

fig, ax = plt.subplots(figsize=(6, 3))
ax.scatter(kick, np.linalg.norm(P.v[-1, :, 3:5], axis=-1), s=3, c=slid, cmap="coolwarm")
ax.set(xlabel="kick (m/s)", ylabel="base speed after 10 ms (m/s)", title="1,000 quadrupeds (red: a foot slid)")

# %%
# Derivatives of a step
# ---------------------
# :func:`sparsedyn.contact_step_derivatives` differentiates the step in the modes it is in (the
# implicit function theorem on sticking, sliding and open contacts), on the tangent space, for
# trajectory optimisation or learning: here how the next velocity of the box sliding at 1 m/s
# depends on its velocity (along the slide: 1, the friction impulse depends on its direction only).
d = sd.contact_step_derivatives(box, np.array([0, 0, h, 0, 0, 0, 1.0]), np.array([0, 0, 0, 1.0, 0, 0]),
                                np.zeros(6), corners, dt)
print("modes", d.step.modes.tolist(), "; dv+/dv along the slide:", round(d.dv_dv[3, 3], 12))
assert abs(d.dv_dv[3, 3] - 1.0) <= 1e-9
