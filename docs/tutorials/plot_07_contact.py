"""
Robots in contact: a quadruped shifting its weight, a humanoid landing
======================================================================

Solo12 stands on its four feet (point contacts) under a joint PD controller
while a sideways then forward push on its base makes it shift its weight from
foot to foot; the contact forces come out of :func:`sparsedyn.contact_dynamics`
at every step.  Then a humanoid lands on both soles (6D contacts) and
:func:`sparsedyn.impulse_dynamics` gives its velocity right after the impact.
"""

# %%
# Solo12 standing
# ---------------
# The feet are 3D contacts: an unknown force each, no moment.  The base height
# is chosen so that the feet touch z = 0.
import os

import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd
from sparsedyn.interop import example_robot_data_dir

path = os.path.join(example_robot_data_dir(), "solo_description", "robots", "solo12.urdf")
model = sd.load_urdf(path, floating_base=True)
feet = tuple(sd.Contact(f, "3d") for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"))
q0 = np.array([0, 0, 0.3, 0, 0, 0, 1] + [0, 0.8, -1.6] * 2 + [0, -0.8, 1.6] * 2, float)
q0[2] -= min(sd.frame_placement(model, q0, c.frame)[1][2] for c in feet)
print(model)
print("total mass", round(model.total_mass, 3), "kg; weight", round(9.81 * model.total_mass, 2), "N")

# %%
# The torques that hold the posture: gravity ``g(q0) = S^T tau_j + J^T f``
# with the base unactuated, split between the 12 joints and the 12 foot force
# components by least squares (the contact Jacobian in the feet's frames).
J = np.vstack([sd.frame_jacobian(model, q0, c.frame)[3:] for c in feet])
S = np.vstack([np.zeros((6, 12)), np.eye(12)])
x = np.linalg.lstsq(np.hstack([S, J.T]), sd.generalized_gravity(model, q0), rcond=None)[0]
tau_ff = S @ x[:12]

# %%
# Standing and shifting weight
# ----------------------------
# Joint PD control around the standing posture on top of those torques, a push
# on the base (body frame: sideways for the first half, forward for the
# second), semi-implicit Euler with a small Baumgarte gain so that the contacts
# do not drift.
dt, steps = 0.004, 150
kp, kd = 8.0, 0.2
q, v = q0.copy(), np.zeros(model.nv)
t = np.arange(steps) * dt
fz = np.zeros((steps, 4))
qs, fs = np.zeros((steps, model.nq)), np.zeros((steps, 4, 3))     # the motion and the foot forces, for the viewer
for k in range(steps):
    tau = tau_ff.copy()
    tau[6:] += kp * (q0[7:] - q[7:]) - kd * v[6:]
    f_ext = np.zeros((model.nbodies, 6))
    push = 6.0 * np.sin(np.pi * t[k] / (steps * dt / 2)) ** 2
    f_ext[0, 4 if k < steps // 2 else 3] = push          # [n; f]: f_y, then f_x on the base
    a, forces = sd.contact_dynamics(model, q, v, tau, feet, f_ext=f_ext, baumgarte=20.0)
    # forces are in the feet's frames: turn them into world axes for the vertical component
    fz[k] = [(sd.frame_placement(model, q, c.frame)[0] @ f)[2] for c, f in zip(feet, forces.reshape(4, 3))]
    qs[k], fs[k] = q, forces.reshape(4, 3)
    v = v + dt * a
    q = sd.integrate(model, q, dt * v)
drift = max(np.linalg.norm(sd.frame_placement(model, q, c.frame)[1] - sd.frame_placement(model, q0, c.frame)[1])
            for c in feet)
print(f"after {steps * dt:.1f} s the feet moved by at most {drift * 1e3:.3f} mm")
print("sum of the vertical foot forces at rest:", round(fz[0].sum(), 3), "N")
# at rest (no push yet, v = 0) the feet carry the weight, to the rounding of the contact solve (1e-11 relative
# allows a condition number of about 1e4); the Baumgarte term holds the feet within a tenth of a millimetre
weight = model.total_mass * np.linalg.norm(model.gravity)
assert abs(fz[0].sum() - weight) <= 1e-11 * weight and drift < 1e-4

fig, ax = plt.subplots(figsize=(8, 3.5))
for j, c in enumerate(feet):
    ax.plot(t, fz[:, j], label=c.frame)
ax.axvline(steps * dt / 2, color="gray", lw=0.5)
ax.set(xlabel="time (s)", ylabel="vertical contact force (N)",
       title="solo12: a sideways push, then a forward one")
ax.legend(ncol=4, loc="lower left", fontsize="small")

# %%
# The same motion in the browser viewer, with the foot forces as arrows (the robot's weight is
# half a metre); ``viewer.record("solo12_push.html", ...)`` writes this page to a file.
viewer = sd.Viewer(model, verbose=False, compiled=False)
animation = viewer.animation(qs, dt, contacts={c.frame: fs[:, j] for j, c in enumerate(feet)})
viewer.close()
animation

# %%
# A humanoid landing
# ------------------
# The built-in humanoid touches down with both soles flat, falling at 1 m/s and
# drifting forward; a plastic impact (restitution 0) stops both soles at once.
# The impulses (N s) act on the robot, in the sole frames.
hum = sd.humanoid()
qh = sd.humanoid_standing_configuration()
soles = (sd.Contact("l_sole"), sd.Contact("r_sole"))
rng = np.random.default_rng(0)
vh = 0.2 * rng.normal(size=hum.nv)
vh[:6] = [0, 0, 0, 0.3, 0, -1.0]                           # base twist [omega; v], body frame
after = sd.impulse_dynamics(hum, qh, vh, soles)
for name, vel in (("before", vh), ("after", after.v)):
    sole_v = [sd.frame_velocity(hum, qh, vel, s.frame) for s in soles]
    print(f"{name:6s}: base linear velocity {np.round(vel[3:6], 3)}, "
          f"max sole velocity {max(np.abs(x).max() for x in sole_v):.2e}")
imp = after.impulses.reshape(2, 6)
print("vertical impulses (N s):", np.round(imp[:, 5], 3), " total", round(imp[:, 5].sum(), 3))
# the soles stop, and the impulses (turned into world axes) are the change of the robot's linear momentum
assert max(np.abs(sd.frame_velocity(hum, qh, after.v, s.frame)).max() for s in soles) <= 1e-12
dl = sd.centroidal_momentum(hum, qh, after.v)[3:] - sd.centroidal_momentum(hum, qh, vh)[3:]
world = sum(sd.frame_placement(hum, qh, s.frame)[0] @ p[3:] for s, p in zip(soles, imp))
assert np.abs(world - dl).max() <= 1e-12 * max(1.0, np.abs(dl).max())

e = np.linspace(0, 1, 6)
bounce = [sd.impulse_dynamics(hum, qh, vh, soles, restitution=x).impulses.reshape(2, 6)[:, 5].sum() for x in e]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
ax1.bar(np.arange(hum.nv), after.v - vh)
ax1.set(xlabel="velocity coordinate", ylabel="v+ - v", title="velocity change at the impact")
ax2.plot(e, bounce, "o-")
ax2.set(xlabel="restitution", ylabel="total vertical impulse (N s)", title="harder bounces need more impulse")
plt.tight_layout()
