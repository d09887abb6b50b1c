"""
Simulating in a scene: a box on a table, boxes on slopes, a box stack, a quadruped onto a step
==============================================================================================

A :class:`sparsedyn.Scene` finds the contacts from the collision shapes at every step, so a body
lands on whatever part of it hits first (:doc:`/guide/simulation`).  A box is dropped tilted onto a
table, with its height, its number of contacts and its energy plotted; then boxes are set on slopes
steeper and shallower than the friction angle: below ``atan(mu)`` they stick, above it they slide
with Coulomb's acceleration ``g (sin theta - mu cos theta)``, printed beside the simulated one.
Three boxes dropped on each other come to rest as a stack, each level carrying the weight above it;
and a quadruped (Unitree's A1 of example-robot-data, its collision model made of boxes,
cylinders and spheres) trots onto a step under a joint-space PD controller.  Every number printed
is also asserted.
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

# %%
# A stack of boxes
# ----------------
# Three boxes (1 kg, 20 cm) are three free bodies of one model.  With ``self_collision=True`` the
# scene checks each box against the floor and against the others (two shapes on bodies that are
# neither the same nor parent and child): a box on a box is a pair of two robot shapes, its
# contacts the vertices of the polygon where the resting faces meet, each an impulse that pushes the
# two boxes apart equally (the step reports it on the pair's first box, the lower one here).  The
# boxes start 2 mm above each other and the floor, each shifted by 3 cm from the one below; at rest
# each level carries the weight above it: the floor ``3 m g``, the lowest box ``2 m g``, the middle
# one ``m g``.  ``tol=1e-6`` (relative to the impulse scale) is enough for a figure.  A step the
# solver could not finish would say so (:class:`sparsedyn.ContactStepWarning`); the tutorial counts
# them (none here).
import warnings
M1, LEVELS = 1.0, 3
I1 = M1 * SIDE ** 2 / 6 * np.eye(3)
builder = sd.ModelBuilder("stack")
for k in range(LEVELS):
    builder = builder.add_body(f"box{k}", None, sd.make_joint("free"), mass=M1, rot_inertia=I1).add_frame(f"box{k}",
                                                                                                          f"box{k}")
stack = builder.build()
stack = stack.with_geometry(*[sd.Geometry(f"box{k}", k, sd.spatial.Transform(np.eye(3), np.zeros(3)), "box",
                                          (SIDE,) * 3, "collision") for k in range(LEVELS)])
stack_scene = sd.Scene(stack, world=[floor], friction=0.6)
print(stack_scene.pairs)
q0 = np.concatenate([[0.03 * k, 0.0, SIDE / 2 + k * SIDE + 0.002 * (k + 1), 0, 0, 0, 1] for k in range(LEVELS)])
STACK_DT, STACK_STEPS = 2e-3, 100
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", sd.ContactStepWarning)
    pile = sd.rollout(stack, q0, np.zeros(6 * LEVELS), np.zeros(6 * LEVELS), stack_scene, STACK_DT, STACK_STEPS,
                      tol=1e-6)
print(f"{len(caught)} of {STACK_STEPS} steps stopped at the iteration cap ({pile.iterations.max()} iterations), "
      f"the median step took {int(np.median(pile.iterations))}")


def level_loads(q, impulses):
    """Normal force [N] on the floor, on box0 from box1 and on box1 from box2 in the step from ``q``."""
    pairs = sd.collide(stack_scene, q).pairs                  # the step's contacts, in its order
    out = {"floor": 0.0, "box1": 0.0, "box2": 0.0}
    for (a, b), impulse in zip(pairs, impulses):
        out[b] += impulse[2] / STACK_DT
    return list(out.values())


loads = np.array([level_loads(q, x) for q, x in zip(pile.q[:-1], pile.impulses)])
heights = pile.q[-1][2::7]
print("rest heights:", np.round(heights, 7), "m (0.1, 0.3 and 0.5: the boxes' centres)")
print(f"loads: floor {loads[-1][0]:.4f} N, box0 / box1 {loads[-1][1]:.4f} N, box1 / box2 {loads[-1][2]:.4f} N "
      f"(3 m g = {3 * M1 * G:.4f} N, 2 m g = {2 * M1 * G:.4f} N, m g = {M1 * G:.4f} N)")
assert not caught
# at rest a contact's velocity is within tol of the velocity scale g dt: heights and loads to that over the levels
V_REST = 100 * 1e-6 * G * STACK_DT
assert np.abs(heights - [0.1, 0.3, 0.5]).max() < 3 * STACK_DT * V_REST
assert np.abs(loads[-1] - M1 * G * np.array([3, 2, 1])).max() < 2 * 3 * M1 * V_REST / STACK_DT

t = STACK_DT * np.arange(STACK_STEPS + 1)
fig, ax = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
ax[0].plot(t, pile.q[:, 2::7], label=["box0", "box1", "box2"])
ax[0].set_ylabel("height [m]")
ax[0].legend()
ax[1].plot(t[:-1], loads / (M1 * G), label=["floor", "box0 / box1", "box1 / box2"])
ax[1].set_ylabel("normal force / (m g)")
ax[1].set_ylim(-0.5, 5)
ax[1].legend()
ax[1].set_xlabel("time [s]")
fig.tight_layout()

# %%
# A quadruped trots onto a step
# -----------------------------
# Unitree's A1 (example-robot-data) describes its collision model with primitives: a box for the
# trunk, cylinders at the hips, boxes for the legs and a 2 cm sphere for each foot.  On flat ground
# and a low step only the feet touch, so the scene checks the feet alone
# (:meth:`sparsedyn.Scene.with_pairs` removes the other pairs): eight pairs, at most a few contacts at
# a time, a small contact step to build.  The motors' rotors are the joints' armature (0.01 kg m^2).
#
# The controller is a PD on a trotting joint trajectory: each foot follows a path in its hip's
# sagittal plane (back along the ground in stance, up and forward in swing; the diagonal legs
# together), turned into thigh and knee angles by the two-link inverse kinematics.  It knows
# nothing of the step: a foot that lands on it is stopped there, and the PD gives way.  In the
# figure the front feet first strike the step's edge and are pushed back (about 0.6 to 0.9 s)
# before they land on top; the hind feet follow from about 2.4 s.
import os

from sparsedyn.interop import example_robot_data_dir

a1 = sd.load_urdf(os.path.join(example_robot_data_dir(), "a1_description", "urdf", "a1.urdf"),
                  floating_base=True, geometry=True)
a1 = a1.with_armature(np.r_[np.zeros(6), np.full(12, 0.01)])
STEP_X, STEP_H = 0.25, 0.04                                   # the step's edge and height [m]
step = sd.Shape("box", (0.8, 1.0, STEP_H), placement=(np.eye(3), [STEP_X + 0.4, 0.0, STEP_H / 2]), name="step")
a1_scene = sd.Scene(a1, world=[floor, step], friction=0.8, self_collision=False)
a1_scene = a1_scene.with_pairs(remove=[p for p in a1_scene.pairs if not p[0].endswith("foot_0")])
print(a1_scene)

LEGS, THIGH, CALF, RADIUS = ("FL", "FR", "RL", "RR"), 0.2, 0.2, 0.02
HEIGHT, PERIOD, STRIDE, LIFT = 0.28, 0.3, 0.1, 0.1                # hip height, gait period, stride, foot lift [m, s]
PHASE = {"FL": 0.0, "RR": 0.0, "FR": 0.5, "RL": 0.5}            # a trot: the diagonal legs together


def leg_angles(x, z):
    """Thigh and knee angles that put the foot at (x, z) from the thigh joint (x forward, z up)."""
    knee = -np.arccos(np.clip((x * x + z * z - THIGH ** 2 - CALF ** 2) / (2 * THIGH * CALF), -1.0, 1.0))
    return np.arctan2(-x, -z) - np.arctan2(CALF * np.sin(knee), THIGH + CALF * np.cos(knee)), knee


def joint_targets(t):
    """The trot's joint angles (12,) at time t: hip abduction 0, thigh and knee from each foot's path."""
    ramp = min(t / 0.3, 1.0)                                      # start from standing
    out = []
    for leg in LEGS:
        s = (t / PERIOD + PHASE[leg]) % 1.0
        if s < 0.5:                                               # stance: the foot goes back along the ground
            x, z = STRIDE * ramp * (0.25 - s), -HEIGHT
        else:                                                     # swing: up first, forward, down
            u = 2 * s - 1
            w = np.clip((u - 0.15) / 0.55, 0.0, 1.0)
            x, z = STRIDE * ramp * (-0.25 + 0.5 * w * w * (3 - 2 * w)), -HEIGHT + LIFT * ramp * np.sin(np.pi * u)
        out += [0.0, *leg_angles(x, z)]
    return np.array(out)


KP, KD = 250.0, 5.0                                               # [N m / rad], [N m s / rad]


def trot(t, q, v):
    return np.r_[np.zeros(6), KP * (joint_targets(t) - q[7:]) - KD * v[6:]]


A1_DT, A1_STEPS = 2e-3, 1500
q0 = np.r_[0.0, 0.0, HEIGHT + RADIUS + 1e-3, 0.0, 0.0, 0.0, 1.0, joint_targets(0.0)]
walk = sd.rollout(a1, q0, np.zeros(18), trot, a1_scene, A1_DT, A1_STEPS, tol=1e-6)

feet = np.array([[sd.frame_placements(a1, q)[1][a1.frame(f"{leg}_foot")] for leg in LEGS] for q in walk.q])
t = A1_DT * np.arange(A1_STEPS + 1)
print(f"the trunk went {walk.q[-1][0]:.3f} m forward and {walk.q[-1][2] - walk.q[0][2]:+.3f} m up")
for leg, (x, y, z) in zip(LEGS, feet[-1]):
    print(f"{leg} foot ends at x = {x:.3f} m, z = {z:.3f} m ({'on the step' if x > STEP_X else 'on the floor'})")
on_step = feet[-1][:, 0] > STEP_X + RADIUS
assert walk.q[-1][0] > 0.4 and on_step.all()                    # all four feet ended on the step
# the feet that stand (lowest, in contact) stand on the step's top: their centres one radius above it
assert abs(feet[-1][:, 2].min() - (STEP_H + RADIUS)) < 2e-3
normal = np.array([x[:, 2].sum() / A1_DT if len(x) else 0.0 for x in walk.impulses])
print(f"mean vertical contact force {normal[-500:].mean():.1f} N over the last second "
      f"(the robot's weight m g = {a1.total_mass * G:.1f} N)")
assert abs(normal[-500:].mean() - a1.total_mass * G) < 0.1 * a1.total_mass * G

fig, ax = plt.subplots(3, 1, figsize=(7, 7), sharex=True)
ax[0].plot(t, walk.q[:, 0], label="trunk")
ax[0].plot(t, feet[:, :, 0], lw=0.8, label=[f"{leg} foot" for leg in LEGS])
ax[0].axhline(STEP_X, color="k", ls=":", lw=0.8)
ax[0].set_ylabel("x [m]")
ax[0].legend(ncol=5, fontsize=7)
for k in range(4):
    ax[1].plot(t, feet[:, k, 2], lw=0.8, color=f"C{k + 1}")           # the feet's colours above
ax[1].axhline(RADIUS, color="k", ls=":", lw=0.8)
ax[1].axhline(STEP_H + RADIUS, color="k", ls=":", lw=0.8)
ax[1].set_ylabel("foot height [m]")
ax[2].plot(t[:-1], normal, lw=0.5)
ax[2].axhline(a1.total_mass * G, color="k", ls=":", lw=0.8)
ax[2].set_ylabel("contact force [N]")
ax[2].set_xlabel("time [s]")
fig.tight_layout()
