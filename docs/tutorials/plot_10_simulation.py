"""
Simulating in a scene: a box dropped on a table, boxes on slopes
================================================================

A :class:`sparsedyn.Scene` finds the contacts from the collision shapes at every step, so a body
lands on whatever part of it hits first (:doc:`/guide/simulation`).  A box is dropped tilted onto a
table, with its height, its number of contacts and its energy plotted; then boxes are set on slopes
steeper and shallower than the friction angle: below ``atan(mu)`` they stick, above it they slide
with Coulomb's acceleration ``g (sin theta - mu cos theta)``, printed beside the simulated one.
Every number printed is also asserted.
"""

# %%
# A box dropped on a table
# ------------------------
# The box (2 kg, 20 cm) is a model with one collision shape; the floor and the table are world
# shapes.  Each step runs :func:`sparsedyn.collide` and solves the contacts with exact Coulomb
# friction.
import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd

MASS, SIDE, G, DT = 2.0, 0.2, 9.81, 1e-3
I = MASS * SIDE ** 2 / 6 * np.eye(3)
box = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=MASS, rot_inertia=I) \
    .add_frame("box", "box").build()
box = box.with_geometry(sd.Geometry("box", 0, sd.spatial.Transform(np.eye(3), np.zeros(3)), "box", (SIDE,) * 3,
                                    "collision"))
floor = sd.Shape("plane", name="floor")
table = sd.Shape("box", (1.0, 1.0, 0.2), placement=(np.eye(3), [0.0, 0.0, 0.1]), name="table")
scene = sd.Scene(box, world=[floor, table], friction=0.5)
print(scene)

angle = 0.3                                                     # tilted about x, 30 cm above the table
q0 = np.array([0.0, 0.0, 0.5, np.sin(angle / 2), 0.0, 0.0, np.cos(angle / 2)])
steps = 500
traj = sd.rollout(box, q0, np.zeros(6), np.zeros(6), scene, DT, steps)


def energy(q, v):
    """Kinetic + potential energy (v: the body's angular and linear velocity in its own frame)."""
    return 0.5 * v @ sd.crba(box, q) @ v + MASS * G * q[2]


E = np.array([energy(q, v) for q, v in zip(traj.q, traj.v)])
count = [len(x) for x in traj.impulses]
t = DT * np.arange(steps + 1)
print(f"rests at z = {traj.q[-1][2]:.6f} m (the table's top + half the side: {0.2 + SIDE / 2:.6f} m)")
print(f"{count[-1]} contacts carry {traj.impulses[-1][:, 2].sum() / DT:.4f} N (m g = {MASS * G:.4f} N)")
print(f"energy: {E[0]:.4f} J at the start, {E[-1]:.4f} J at rest; largest rise in a step {np.diff(E).max():.2e} J")
assert abs(traj.q[-1][2] - 0.3) < 1e-4 and count[-1] == 4
assert abs(traj.impulses[-1][:, 2].sum() / DT - MASS * G) < 1e-4 * MASS * G
assert np.diff(E).max() <= 1e-6 * E[0]                           # no step adds energy (solver tolerance)

fig, ax = plt.subplots(3, 1, figsize=(7, 6), sharex=True)
ax[0].plot(t, traj.q[:, 2])
ax[0].set_ylabel("height [m]")
ax[1].step(t[:-1], count, where="post")
ax[1].set_ylabel("contacts")
ax[2].plot(t, E)
ax[2].set_ylabel("energy [J]")
ax[2].set_xlabel("time [s]")
fig.tight_layout()

# %%
# Boxes on slopes
# ---------------
# A slope is a tilted plane with its own friction (0.5: the friction angle is atan(0.5) = 26.6
# degrees).  The box starts at rest on it; after 20 steps its downhill speed over the time is its
# acceleration.
mu = 0.5
print(f"friction angle atan(mu) = {np.degrees(np.arctan(mu)):.1f} deg")
for degrees in (20.0, 35.0):
    theta = np.radians(degrees)
    Ry = np.array([[np.cos(theta), 0, np.sin(theta)], [0, 1, 0], [-np.sin(theta), 0, np.cos(theta)]])
    slope = sd.Shape("plane", placement=(Ry, [0.0, 0.0, 0.0]), friction=mu, name="slope")
    on_slope = sd.Scene(box, world=[slope])
    q = np.concatenate([SIDE / 2 * Ry[:, 2], [0.0, np.sin(theta / 2), 0.0, np.cos(theta / 2)]])
    n = 20
    run = sd.rollout(box, q, np.zeros(6), np.zeros(6), on_slope, DT, n)
    simulated = run.v[-1][3] / (n * DT)             # body x is the downhill tangent of the slope
    analytic = max(G * (np.sin(theta) - mu * np.cos(theta)), 0.0)
    print(f"{degrees:.0f} deg: {run.modes[-1][0]:5s} acceleration {simulated:.6f} m/s^2, "
          f"g (sin - mu cos) = {analytic:.6f} m/s^2")
    assert abs(simulated - analytic) < 1e-5 * G
    assert set(run.modes[-1]) == {"stick" if degrees < 26.6 else "slide"}
