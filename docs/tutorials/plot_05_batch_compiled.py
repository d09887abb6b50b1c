"""
A batch of 100,000 states, compiled
===================================

``sd.compile(model)`` traces each function into a straight-line program,
emits C and builds it on first use; the compiled model is accepted wherever a
model is.  Here: inverse dynamics of Panda for 100,000 states, NumPy against
compiled, same numbers.  (Timings are printed for illustration; they depend on
the machine.)
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd
from sparsedyn.interop import example_robot_data_dir

model = sd.load_urdf(example_robot_data_dir() / "panda_description" / "urdf" / "panda.urdf")
k = sd.compile(model)
rng = np.random.default_rng(0)
N = 100_000
Q = rng.uniform(model.lower, model.upper, size=(N, model.nq))       # inside the joint limits
V, A = rng.normal(size=(N, model.nv)), rng.normal(size=(N, model.nv))

t0 = time.perf_counter()
T_numpy = sd.rnea(model, Q, V, A)
t1 = time.perf_counter()
T_c = sd.rnea(k, Q, V, A)            # builds (or loads from the cache) on the first call
t2 = time.perf_counter()
T_c = sd.rnea(k, Q, V, A)
t3 = time.perf_counter()
print(f"NumPy: {t1 - t0:.2f} s;  compiled, first call (build or cache): {t2 - t1:.2f} s;  "
      f"compiled: {1e3 * (t3 - t2):.1f} ms ({N / (t3 - t2) / 1e6:.1f} M states/s)")
print("max relative difference:", np.abs(T_c - T_numpy).max() / np.abs(T_numpy).max())
# the same program, operations reordered: a rounding difference (16 nv eps), never more
assert np.abs(T_c - T_numpy).max() / np.abs(T_numpy).max() < 16 * model.nv * np.finfo(float).eps
print("flops per state:", k.flops("rnea"))

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.hist(T_c[:, 1], bins=100)
ax.set(xlabel="shoulder torque (N m)", ylabel="states", title="Panda, 100,000 random states")
fig.tight_layout()
