"""
A humanoid pushed over onto a box and stairs
============================================

dm_control's humanoid (27 degrees of freedom, its body made of capsules and spheres) stands in
front of a low box and three stairs, is pushed forwards and falls onto them: its hands, arms and
torso land on the box, its head and hands on the stairs, while its feet stay on the floor.  The
scene comes from the MJCF file (its floor, each geom's friction, its parts frictionless on each
other as the file's ``condim`` 1 makes them, the pairs MuJoCo checks) plus the world boxes we add
(:doc:`/guide/simulation`).  The height of the torso, the number of contacts and the energy are
plotted; the deepest penetration is checked against the scene's margin, and the
energy's few small rises are shown to be the time-stepping's own error, shrinking with the time step.
Last, the same fall with the joints' limits held (:func:`sparsedyn.with_joint_stops`).  Every number
printed is also asserted.
"""

# %%
# The scene
# ---------
# The file's floor is a world shape of the scene; the box and the stairs are added beside it.  A
# stair is one box from the floor to its tread, each 15 cm higher than the one before.
import os
import warnings

import dm_control
import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd

with warnings.catch_warnings():
    warnings.simplefilter("ignore")                 # the file's sites, cameras and sensors, left out
    humanoid = sd.load_mjcf(os.path.join(os.path.dirname(dm_control.__file__), "suite", "humanoid.xml"),
                            geometry=True)
box = sd.Shape("box", (0.2, 0.6, 0.2), placement=(np.eye(3), [0.5, 0.0, 0.1]), name="box")
RISE, RUN = 0.15, 0.3
stairs = [sd.Shape("box", (RUN, 1.2, RISE * (k + 1)), placement=(np.eye(3), [0.8 + RUN * k, 0.0, RISE * (k + 1) / 2]),
                   name=f"stair{k}") for k in range(3)]
scene = sd.Scene(humanoid, world=[box, *stairs])
print(scene)
print([s.name for s in scene.shapes if s.body < 0])        # the file's floor and ours

# %%
# The push
# --------
# The humanoid stands upright, its feet just above the floor, and is given a forward speed of
# 1.2 m/s and a pitch rate of 2 rad/s (a free joint's velocity is ``[omega; v]`` in the torso's
# axes).  No joint torque acts: the joints are limp, and their limits, springs and dampers (data of
# the file) are not applied (``passive=True`` would add the springs and dampers; the last section
# holds the limits), so the humanoid falls as a rag doll.  1.2 s at ``dt`` = 5 ms (MuJoCo's
# time step for this file).
DT, STEPS = 0.005, 240
q0 = np.zeros(humanoid.nq)
q0[2], q0[6] = 1.35, 1.0                                     # height of the torso; quaternion x y z w
v0 = np.zeros(humanoid.nv)
v0[1], v0[3] = 2.0, 1.2
tau = np.zeros(humanoid.nv)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", sd.ContactStepWarning)
    fall = sd.rollout(humanoid, q0, v0, tau, scene, DT, STEPS)
print(f"{len(caught)} of {STEPS} steps stopped at the solver's iteration cap "
      f"(median {int(np.median(fall.iterations))} iterations)")

# %%
# What it touched, and how deep
# -----------------------------
# :func:`sparsedyn.collide` at each state of the rollout lists the pairs within the margin: which
# parts of the humanoid met which shape, and the signed distances.  No shape ever sinks into
# another by more than the scene's margin.  (The queries run natively on the collision kernel the
# rollout's steps built, at zero velocity: nothing more to build.)
touched, deepest = set(), 0.0
for q in fall.q:
    hits = sd.collide(scene, q)
    touched |= set(hits.pairs)
    deepest = min(deepest, hits.distances.min(initial=0.0))
for world in ("floor", "box", "stair0", "stair1"):
    print(f"{world:>7}: {sorted(a for a, b in touched if b == world)}")
print(f"deepest penetration {-deepest * 1e3:.3f} mm (margin {scene.margin * 1e3:.1f} mm)")
assert -deepest <= scene.margin
assert {"head", "right_hand", "left_hand"} <= {a for a, b in touched if b.startswith("stair")}
assert {"torso", "right_hand", "left_hand"} <= {a for a, b in touched if b == "box"}
count = [len(x) for x in fall.impulses]
print(f"at most {max(count)} contacts in a step; {count[-1]} at the end")
print(f"the torso ends at x = {fall.q[-1][0]:.3f} m, z = {fall.q[-1][2]:.3f} m (the box's top: 0.2 m)")
assert 0.2 < fall.q[-1][2] < 0.5 and np.abs(fall.v[-1]).max() < 0.5       # lying on the box, nearly still

# %%
# Energy
# ------
# Kinetic plus potential energy (:func:`sparsedyn.mechanical_energy`, the rotors' armature
# included).  The contacts take most of it: plastic impacts and Coulomb friction.
with sd.use_backend("numpy"):
    E = np.array([sd.mechanical_energy(humanoid, q, v) for q, v in zip(fall.q, fall.v)])
    T = np.array([sd.kinetic_energy(humanoid, q, v) for q, v in zip(fall.q, fall.v)])
    head = np.array([sd.frame_placements(humanoid, q)[1][humanoid.frame("head")] for q in fall.q])
rise = np.diff(E)
print(f"energy {E[0]:.2f} J at the push, {E[-1]:.2f} J at the end; "
      f"largest rise in a step {rise.max():.4f} J, all rises together {rise[rise > 0].sum():.4f} J")
assert E[-1] < 0.5 * E[0]

# The torso and the head over the box's top and the stairs' treads (dotted), the contacts the steps
# solved, and the energy with its kinetic part.
t = DT * np.arange(STEPS + 1)
fig, (height, contacts, energy) = plt.subplots(3, 1, figsize=(7, 7), sharex=True)
height.plot(t, fall.q[:, 2], label="torso")
height.plot(t, head[:, 2], label="head")
for top in (0.2, RISE, 2 * RISE):
    height.axhline(top, color="k", ls=":", lw=0.8)
height.set_ylabel("height [m]")
height.legend()
contacts.step(t[:-1], count, where="post")
contacts.set_ylabel("contacts")
energy.plot(t, E, label="kinetic + potential")
energy.plot(t, T, label="kinetic")
energy.set_ylabel("energy [J]")
energy.legend()
energy.set_xlabel("time [s]")
fig.tight_layout()

# %%
# The energy's rises are the time step's
# --------------------------------------
# The contacts take energy away, but semi-implicit Euler (the velocity first, then the configuration
# with the new velocity) does not keep the energy of an articulated body exactly either: while the
# humanoid pivots on its feet and its hands land, a few steps gain a little.  That is the scheme's
# truncation error, not the contacts' (whose error is the solver's tolerance, whatever the step):
# the same fall at a quarter of the time step gains much less over its first 0.6 s.
FALL = 0.6
first = int(round(FALL / DT))
gains = [rise[:first][rise[:first] > 0].sum()]
with warnings.catch_warnings():
    warnings.simplefilter("ignore", sd.ContactStepWarning)
    fine = sd.rollout(humanoid, q0, v0, tau, scene, DT / 4, 4 * first)
with sd.use_backend("numpy"):
    e = np.diff([sd.mechanical_energy(humanoid, q, v) for q, v in zip(fine.q, fine.v)])
gains.append(e[e > 0].sum())
for dt, gain in zip((DT, DT / 4), gains):
    print(f"dt = {dt * 1e3:.2f} ms: the steps' rises add up to {gain:.4f} J over the first {FALL} s")
assert gains[1] < 0.5 * gains[0]               # a first-order scheme's error: a quarter of it for a quarter of dt

# %%
# With the joints' limits held
# ----------------------------
# The rag doll's joints swung past the limits the file gives them.  :func:`sparsedyn.with_joint_stops`
# holds a hinge's limits as contacts the step solves with the others: a small sphere on the child body
# meets a box on the parent exactly at each limit (a frictionless pair whose gap is ``r sin(q - lower)``).
# A stop holds one hinge between two bodies, and the file's bodies with two or three hinges are one
# composite joint each, so the file is read again with a body per hinge (``composite_joints=False``:
# the same coordinates, the same limits).  The same push, the same 1.2 s.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    hinged = sd.load_mjcf(os.path.join(os.path.dirname(dm_control.__file__), "suite", "humanoid.xml"),
                          geometry=True, composite_joints=False)
stopped = sd.with_joint_stops(hinged)
print(sum(g.name.endswith("/stop") for g in stopped.geometries), "hinges stopped")
held = sd.rollout(stopped, q0, v0, tau, sd.Scene(stopped, world=[box, *stairs]), DT, STEPS)


def past_limits(qs):
    """How far the hinges are past their limits [rad], the largest at each state."""
    h = slice(7, None)
    return np.maximum(hinged.lower[h] - qs[:, h], qs[:, h] - hinged.upper[h]).max(axis=1)


print(f"past the limits: {past_limits(fall.q).max():.2f} rad as a rag doll, "
      f"{past_limits(held.q).max() * 1e3:.2f} mrad with the stops")
# what is left (a step holds a stop's gap to first order in the joint's turn; a landing may jerk a
# joint past its limit before its stop is in the step's problem: the guide's "Joint limits") stays
# within a hundredth of a radian here
assert past_limits(fall.q).max() > 0.5 and past_limits(held.q).max() < 0.01

fig, ax = plt.subplots(figsize=(7, 3))
ax.plot(t, np.maximum(past_limits(fall.q), 0), label="rag doll")
ax.plot(t, np.maximum(past_limits(held.q), 0), label="with stops")
ax.set_ylabel("past the limits [rad]")
ax.set_xlabel("time [s]")
ax.legend()
fig.tight_layout()
