"""
Working with models: reduce, attach, SRDF poses
================================================

Load Talos with its SRDF, lock everything but the legs at the ``half_sitting``
pose the SRDF names, attach a small gripper to the (now rigid) left wrist, and
compare the dynamics before and after.  Along the way: the Coriolis matrix and
task-space errors on SE(3) with ``log6``.
"""

# %%
# Talos and its SRDF
# ------------------
# :func:`sparsedyn.load_srdf` reads the reference configurations (``group_state``),
# the rotor parameters and the disabled collision pairs of an SRDF file.
import os
import warnings

import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd
from sparsedyn.interop import example_robot_data_dir

robots = example_robot_data_dir()
warnings.simplefilter("ignore", sd.UrdfWarning)      # Talos' gripper mimics sit on fixed joints
talos = sd.load_urdf(os.path.join(robots, "talos_data", "robots", "talos_reduced.urdf"), floating_base=True)
srdf = sd.load_srdf(talos, os.path.join(robots, "talos_data", "srdf", "talos.srdf"))
print(srdf)
q_half = srdf.reference_configurations["half_sitting"]
talos = srdf.with_armature()          # the rotors' reflected inertia, rotor_inertia * gear_ratio**2
print(talos, "armature of the knee:", talos.armature[talos.v_slice(talos.joint("leg_left_4_joint"))])

# %%
# Lock everything but the legs
# ----------------------------
# :func:`sparsedyn.reduce_model` welds the locked bodies to their parents at
# their ``half_sitting`` angles: inertias are combined exactly, frames (hands,
# head, grippers) stay where they were, and each locked joint is kept as a fixed
# joint (a force/torque sensor on it would still work).
legs = {n for n in talos.joint_names if n.startswith("leg_")} | {"root_joint"}
locked = [n for n in talos.joint_names if n not in legs]
lower_body = sd.reduce_model(talos, locked, q_half)
print(lower_body, f"(locked {len(locked)} joints)")
keep_q = np.concatenate([np.arange(talos.nq)[talos.q_slice(talos.joint(n))] for n in lower_body.joint_names])
keep_v = np.concatenate([np.arange(talos.nv)[talos.v_slice(talos.joint(n))] for n in lower_body.joint_names])
q_legs = q_half[keep_q]

# %%
# The reduced model is the full one with the upper body at rest
# --------------------------------------------------------------
# With the locked joints at ``half_sitting`` and not moving, the legs feel the
# same forces in both models, and the reduced mass matrix is the legs' block.
rng = np.random.default_rng(0)
v, a = np.zeros(talos.nv), np.zeros(talos.nv)
v[keep_v], a[keep_v] = rng.normal(size=(2, lower_body.nv))
tau_full = sd.rnea(talos, q_half, v, a)[keep_v]
tau_legs = sd.rnea(lower_body, q_legs, v[keep_v], a[keep_v])
print("max |tau_full - tau_reduced| =", np.abs(tau_full - tau_legs).max())
print("mass:", talos.total_mass, "->", lower_body.total_mass, "kg (the upper body is carried as rigid mass)")
print("centre of mass:", sd.center_of_mass(talos, q_half), sd.center_of_mass(lower_body, q_legs))
# equal to rounding (the same sums in another order: 16 nv eps relative, as for any two RNEA evaluations)
eps = np.finfo(float).eps
assert np.abs(tau_full - tau_legs).max() <= 16 * talos.nv * eps * max(1.0, np.abs(tau_full).max())
assert abs(talos.total_mass - lower_body.total_mass) <= 16 * talos.nbodies * eps * talos.total_mass
assert np.abs(sd.center_of_mass(talos, q_half) - sd.center_of_mass(lower_body, q_legs)).max() <= 16 * talos.nv * eps

# %%
# Attach a gripper to the rigid left wrist
# ----------------------------------------
# :func:`sparsedyn.append_model` attaches another model at a frame with a
# placement ``(R, p)``; its names may get a prefix.
g = sd.ModelBuilder("gripper")
g.add_body("palm", None, sd.make_joint("revolute", (0, 0, 1)), mass=0.6, com=[0, 0, 0.04],
           rot_inertia=np.diag([1e-3, 1e-3, 6e-4]), joint_name="wrist_spin", armature=0.05)
for side, y in (("left", 0.03), ("right", -0.03)):
    g.add_body(f"{side}_finger", "palm", sd.make_joint("prismatic", (0, np.sign(y), 0)), Xtree=(np.eye(3), [0, y, 0.08]),
               mass=0.08, com=[0, 0, 0.03], rot_inertia=1e-5 * np.eye(3), joint_name=f"{side}_finger_joint")
g.add_frame("tool", "palm", (np.eye(3), [0, 0, 0.14]))
gripper = g.build()
robot = sd.append_model(lower_body, gripper, "arm_left_7_link", (np.eye(3), [0, 0, -0.1]), prefix="extra_")
print(robot, "new joints:", robot.joint_names[-3:])
q_robot = robot.neutral()                            # the legs at half_sitting, the gripper at zero
for n in lower_body.joint_names:
    q_robot[robot.q_slice(robot.joint(n))] = q_legs[lower_body.q_slice(lower_body.joint(n))]

# %%
# Coriolis matrix and a task-space error on SE(3)
# -----------------------------------------------
# ``coriolis_matrix`` gives ``C(q, v)`` with ``C v`` the velocity terms of the
# bias force; ``log6`` turns the pose error of a foot into a twist [omega; v].
v_robot = rng.normal(size=robot.nv)
C = sd.coriolis_matrix(robot, q_robot, v_robot)
print("|C v - (nle - g)| =", np.abs(C @ v_robot - (sd.nonlinear_effects(robot, q_robot, v_robot)
                                                   - sd.generalized_gravity(robot, q_robot))).max())
R, p = sd.frame_placement(robot, q_robot, "left_sole_link")
R_goal, p_goal = sd.exp3(np.array([0.0, 0.0, 0.2])) @ R, p + np.array([0.05, 0.0, 0.02])
err = sd.log6((R.T @ R_goal, R.T @ (p_goal - p)))      # the body twist that takes the foot to its goal
print("foot error twist [omega; v]:", np.round(err, 4))
assert np.abs(C @ v_robot - (sd.nonlinear_effects(robot, q_robot, v_robot) - sd.generalized_gravity(robot, q_robot))
              ).max() <= 16 * robot.nv * eps * max(1.0, np.abs(sd.nonlinear_effects(robot, q_robot, v_robot)).max())
# the rotation error is R^T exp3(w) R = exp3(R^T w): an angle of |w| = 0.2 rad about R^T w; exp6 of the
# twist takes the foot to its goal
assert np.allclose(err[:3], R.T @ [0.0, 0.0, 0.2], rtol=0, atol=16 * eps)
R_back, p_back = sd.exp6(err)
assert np.allclose(R @ R_back, R_goal, rtol=0, atol=16 * eps) and np.allclose(p + R @ p_back, p_goal, rtol=0, atol=16 * eps)

# %%
# Mass matrices side by side
# --------------------------
# Locking removes rows and columns; the gripper adds a block coupled to the
# legs only through the floating base (branch-induced sparsity).
fig, axes = plt.subplots(1, 3, figsize=(11, 3.8))
for ax, (title, m, q) in zip(axes, [("Talos (38 dofs)", talos, q_half), ("legs only", lower_body, q_legs),
                                    ("legs + gripper", robot, q_robot)]):
    H = sd.crba(m, q)
    ax.spy(np.abs(H) > 0, markersize=2)
    ax.set_title(f"{title}: H {H.shape[0]} x {H.shape[1]}")
fig.tight_layout()
plt.show()
