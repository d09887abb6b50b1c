"""Identify a robot's inertial parameters from simulated, noisy joint torques and a wrist F/T sensor.

    python examples/identify_inertial_parameters.py [path/to/robot.urdf]

Default robot: the Panda arm of example-robot-data when that package is installed, else the
built-in 7-joint chain.  The robot follows a Fourier-series excitation trajectory inside its joint
limits; joint torques (noise 0.5 N m) and a 6-axis F/T sensor in the last arm joint (noise 0.5 N,
0.05 N m) are simulated from the model's own parameters.  The script prints the base parameters
with their estimated standard deviation and true error, the chi-square consistency of the errors
with the covariance, the torque prediction error on a second trajectory, and what a physically
consistent fit changes.  The fit starts from "nominal" parameters (the truth perturbed by up to
30 %, as CAD values would be), which also fill in what the data cannot tell.
"""

import sys

import numpy as np

import sparsedyn as sd
from sparsedyn import identification as idn
from sparsedyn.model.sensors import ForceTorque


def robot():
    if len(sys.argv) > 1:
        return sd.load_urdf(sys.argv[1])
    from sparsedyn.interop import example_robot_data_dir
    d = example_robot_data_dir()
    if d is not None and (d / "panda_description/urdf/panda.urdf").exists():
        return sd.load_urdf(d / "panda_description/urdf/panda.urdf")
    return sd.builtin("chain7")


def fourier_trajectory(model, t, rng, harmonics=5, period=10.0):
    """``(q, v, a)`` at times ``t`` (N,): per joint coordinate ``q0 + sum_k A_k sin(k w t + phi_k)``,
    amplitudes inside the joint limits (revolute-type models: nq == nv)."""
    assert model.nq == model.nv, "this example drives one coordinate per dof (no quaternion joints)"
    lo, hi = np.maximum(model.lower, -np.pi), np.minimum(model.upper, np.pi)
    q0, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    w = 2 * np.pi / period
    k = np.arange(1, harmonics + 1)
    A = rng.uniform(-1, 1, size=(model.nq, harmonics)) / k
    A *= (0.8 * half / np.abs(A).sum(1))[:, None]                # stay inside the limits
    phi = rng.uniform(0, 2 * np.pi, size=(model.nq, harmonics))
    arg = k * w * t[:, None, None] + phi                        # (N, nq, K)
    q = q0 + np.sum(A * np.sin(arg), -1)
    v = np.sum(A * k * w * np.cos(arg), -1)
    a = -np.sum(A * (k * w) ** 2 * np.sin(arg), -1)
    return q, v, a


def main():
    model = robot()
    rng = np.random.default_rng(0)
    t = np.linspace(0, 10, 1000)
    q, v, a = fourier_trajectory(model, t, rng)
    pi = model.inertial_parameters()
    sigma_tau = 0.5
    tau = sd.rnea(model, q, v, a) + sigma_tau * rng.normal(size=(len(t), model.nv))
    revolute = [i for i, j in enumerate(model.joints) if j.type in ("revolute", "continuous")]
    ft = ForceTorque("wrist_ft", model.joint_names[revolute[-1]],
                     covariance=[0.05 ** 2] * 3 + [0.5 ** 2] * 3)
    y = sd.force_torque_regressor(model, q, v, a, ft) @ sd.force_torque_parameters(model, ft)
    y = y + rng.normal(size=y.shape) * np.sqrt(np.diag(ft.covariance(6)))

    # What a user starts from: CAD values, here the truth with every parameter off by up to 30 %.
    nominal = pi * rng.uniform(0.7, 1.3, size=pi.shape)
    base = idn.base_parameters(model, sensors=[ft])
    res = sd.identify(model, q, v, a, tau, sigma=sigma_tau, ft={ft: y}, base=base, reference=nominal)
    truth = base.base(pi)
    err = res.beta - truth
    print(f"{model.name}: {model.nbodies} bodies, {10 * model.nbodies} inertial parameters, "
          f"{base.rank} base parameters; {len(t)} samples of {model.nv} joint torques + 6 F/T components")
    print(f"{'base parameter':58s} {'true':>10s} {'estimate':>10s} {'std':>9s} {'err/std':>8s}")
    for name, b, e, s in zip(base.names, truth, res.beta, res.std):
        print(f"{name[:58]:58s} {b:10.4f} {e:10.4f} {s:9.2e} {(e - b) / s:8.2f}")
    stat = err @ np.linalg.solve(res.covariance, err)
    print(f"chi-square of the errors: {stat:.1f} for {base.rank} parameters "
          f"(expected {base.rank} +- {np.sqrt(2 * base.rank):.1f})")
    print(f"relative error of the base parameters: {np.linalg.norm(err) / np.linalg.norm(truth):.2e} "
          f"(nominal values: {np.linalg.norm(base.base(nominal) - truth) / np.linalg.norm(truth):.2e})")

    t2 = np.linspace(0, 10, 200)
    q2, v2, a2 = fourier_trajectory(model, t2, np.random.default_rng(1))
    tau2 = sd.rnea(model, q2, v2, a2)
    pred = sd.rnea(res.model(model), q2, v2, a2)
    nom = sd.rnea(model.with_inertial_parameters(nominal), q2, v2, a2)
    print(f"torque prediction on a new trajectory: rms error {np.sqrt(np.mean((pred - tau2) ** 2)):.3f} N m "
          f"(nominal model {np.sqrt(np.mean((nom - tau2) ** 2)):.3f} N m, rms torque {np.sqrt(np.mean(tau2 ** 2)):.2f} N m)")

    J = res.pseudo_inertias
    print(f"least squares: smallest pseudo-inertia eigenvalue {np.linalg.eigvalsh(J).min():+.2e} "
          f"({'physical' if np.linalg.eigvalsh(J).min() >= 0 else 'not physical'})")
    pc = sd.identify(model, q, v, a, tau, sigma=sigma_tau, ft={ft: y}, base=base, reference=nominal,
                     physically_consistent=True)
    print(f"physically consistent fit: smallest eigenvalue {np.linalg.eigvalsh(pc.pseudo_inertias).min():+.2e}, "
          f"whitened residual rms {pc.residual_rms:.3f} (least squares {res.residual_rms:.3f}), "
          f"base-parameter error {np.linalg.norm(pc.beta - truth) / np.linalg.norm(truth):.2e}")


if __name__ == "__main__":
    main()
