"""
Inverse and forward dynamics of a real robot
============================================

Load the Panda arm from ``example-robot-data``, compute inverse dynamics,
forward dynamics, the mass matrix and its inverse along a trajectory, and check
the identities that tie them together.
"""

# %%
# Loading the model
# -----------------
# :func:`sparsedyn.interop.example_robot_data_dir` is the folder of the URDF
# files that the ``example-robot-data`` package installs.
import os

import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd
from sparsedyn.interop import example_robot_data_dir

path = os.path.join(example_robot_data_dir(), "panda_description", "urdf", "panda.urdf")
model = sd.load_urdf(path)
print(model)
print("nq =", model.nq, " nv =", model.nv, " bodies:", model.nbodies)

# %%
# A trajectory, one batch call per function
# -----------------------------------------
# Every function accepts leading batch axes: a trajectory of ``N`` states is
# one call.  Here the joints follow sines; ``v`` and ``a`` are their exact
# derivatives.
N = 400
t = np.linspace(0.0, 4.0, N)
amp = 0.4 * np.ones(model.nv)
freq = np.linspace(0.5, 1.2, model.nv)
q0 = model.neutral()
q = q0 + amp * np.sin(freq * t[:, None])
v = amp * freq * np.cos(freq * t[:, None])
a = -amp * freq**2 * np.sin(freq * t[:, None])

tau = sd.rnea(model, q, v, a)                 # (N, nv): inverse dynamics
g = sd.generalized_gravity(model, q)          # (N, nv): the gravity part
a_back = sd.aba(model, q, v, tau)             # forward dynamics recovers a
print("max |aba(rnea(a)) - a| =", np.abs(a_back - a).max())

# %%
# The identity ``tau = H a + C`` ties the mass matrix (CRBA) and the
# nonlinear effects to RNEA; Carpentier's ``minv`` inverts ``H`` without
# forming it.
H = sd.crba(model, q)                         # (N, nv, nv)
C = sd.nonlinear_effects(model, q, v)         # (N, nv)
print("max |H a + C - tau| =", np.abs(np.einsum("nij,nj->ni", H, a) + C - tau).max())
Hinv = sd.minv(model, q)
print("max |Minv H - I|   =", np.abs(Hinv @ H - np.eye(model.nv)).max())

# The numbers printed are rounding errors: each within a small multiple of the
# machine epsilon times the problem's condition number (cond(H) for a solve).
eps, kappa = np.finfo(float).eps, np.linalg.cond(H).max()
assert np.abs(a_back - a).max() < 100 * model.nv * eps * kappa * max(1.0, np.abs(a).max())
assert np.abs(np.einsum("nij,nj->ni", H, a) + C - tau).max() < 100 * model.nv * eps * np.abs(tau).max()
assert np.abs(Hinv @ H - np.eye(model.nv)).max() < 100 * model.nv * eps * kappa

# %%
# Plotting the joint torques
# --------------------------
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5), sharex=True)
for j in range(model.nv):
    ax1.plot(t, tau[:, j], label=model.joint_names[j] if hasattr(model, "joint_names") else f"joint {j}")
    ax2.plot(t, tau[:, j] - g[:, j])
ax1.set(title="joint torques tau (N m)", xlabel="time (s)")
ax2.set(title="tau minus gravity (N m)", xlabel="time (s)")
ax1.legend(fontsize=7, ncol=2)
fig.tight_layout()

# %%
# The mass matrix of a tree is sparse where branches are independent; a
# chain like Panda fills it, a humanoid does not.
fig, axes = plt.subplots(1, 2, figsize=(8, 4))
axes[0].imshow(np.abs(H[0]) > 0, cmap="Greys")
axes[0].set_title("Panda: H(q) nonzeros")
hum = sd.humanoid()
axes[1].imshow(sd.sparsity_pattern(hum), cmap="Greys")
axes[1].set_title("humanoid: structural nonzeros of H")
fig.tight_layout()
