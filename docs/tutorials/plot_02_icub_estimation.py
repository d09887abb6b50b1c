"""
Joint torques and contact wrenches of iCub from its own F/T sensors
===================================================================

iCub carries six 6-axis force/torque sensors (legs, feet, arms) on fixed joints
of its URDF.  :func:`sparsedyn.load_urdf` reads them into ``model.sensors``; an
estimation problem with both feet in contact tells, before any data, whether
they determine every joint torque and both contact wrenches, then estimates
them from noisy readings.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd
from sparsedyn.interop import example_robot_data_dir

path = example_robot_data_dir() / "icub_description" / "robots" / "icub.urdf"
model = sd.load_urdf(path, floating_base=True)
print(model)
for s in model.sensors:
    print(" ", s.name, "on joint", s.joint)

# %%
# The problem and its verdict
# ---------------------------
# Unknown: the contact wrenches at both soles and the floating base's
# acceleration; measured: the six F/T sensors and the other joints'
# accelerations (from the encoders).
prob = sd.EstimationProblem(model, contacts=["l_sole", "r_sole"], unknown_accelerations=["root_joint"])
print(prob.verdict())
assert prob.verdict().ok                             # the six sensors determine every torque
est = prob.analyze()

# %%
# Simulated measurements
# ----------------------
# A random state consistent with the contacts, its exact sensor readings
# (``prob.measurements``), then noise of 0.5 N / 0.05 N m on the sensors.
from sparsedyn.estimation.casestudy import consistent_state

rng = np.random.default_rng(0)
N = 200
q, v, a, w = consistent_state(prob, rng, batch=(N,))
y, truth = prob.measurements(q, v, a, w)
noise = np.zeros_like(y)
for name, (offset, size) in prob.addresses.items():
    if name != "qdd":                                # F/T sensors: [n; f], N m and N
        noise[:, offset:offset + size] = rng.normal(size=(N, size)) * np.tile([0.05] * 3 + [0.5] * 3, size // 6)
e = est.solve(q, v, y + noise)
exact = est.solve(q, v, y)
print("noise-free: max |tau error| =", np.abs(exact.tau - truth["tau"]).max())
assert np.abs(exact.tau - truth["tau"]).max() < 1e-8 * np.abs(truth["tau"]).max()   # rounding only
err = e.tau - truth["tau"]
print("with noise: rms torque error per joint (N m), worst:", np.sqrt((err**2).mean(0)).max())

# %%
fig, ax = plt.subplots(figsize=(9, 3.5))
ax.bar(np.arange(model.nv), np.sqrt((err**2).mean(0)))
ax.set(xlabel="dof", ylabel="rms error (N m)", title="iCub: torque estimation error with noisy F/T sensors")
fig.tight_layout()
