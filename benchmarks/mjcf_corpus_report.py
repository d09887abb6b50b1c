"""Every MJCF file of the installed dm_control package through ``sparsedyn.load_mjcf``, against MuJoCo.

    .venv/bin/python benchmarks/mjcf_corpus_report.py [--states 2] [--warnings]

Per file: whether MuJoCo's compiler accepts it, whether it loads, nv, what the one MjcfWarning
lists (kinds only; ``--warnings`` prints the full messages after the table), and the worst
relative error against MuJoCo over ``--states`` random states, MuJoCo's passive forces and
constraints disabled (gravity kept): RNEA vs ``mj_inverse``'s ``qfrc_inverse``, CRBA vs
``mj_fullM``, ABA vs ``mj_forward``'s ``qacc``, frame placements vs ``xpos``/``xmat`` and
``site_xpos``/``site_xmat`` (armature included), and the file's force, torque and accelerometer
sensors (as ``model.sensors``) predicted from MuJoCo's ``qacc`` vs its ``sensordata``.  Relative: divided by max(1, largest entry of
MuJoCo's result).
"""

import argparse
import re
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import sparsedyn as sd                                    # noqa: E402
from sparsedyn.interop import mujoco as mjx               # noqa: E402


def worst_errors(mujoco, model, mm, states):
    D = mujoco.mjtDisableBit
    mm.opt.disableflags |= int(D.mjDSBL_CONTACT | D.mjDSBL_CONSTRAINT | D.mjDSBL_EQUALITY | D.mjDSBL_LIMIT
                               | D.mjDSBL_FRICTIONLOSS | D.mjDSBL_SPRING | D.mjDSBL_DAMPER | D.mjDSBL_ACTUATION)
    md = mujoco.MjData(mm)
    rng = np.random.default_rng(0)
    rel = lambda e, r: float(np.max(np.abs(e))) / max(1.0, float(np.max(np.abs(r), initial=0.0)))  # noqa: E731
    err = dict.fromkeys(("rnea", "crba", "aba", "frames", "sensors"), 0.0)
    sensors = [x for x in model.sensors if not isinstance(x, sd.model.sensors.JointTorque)]
    index = {n: k for k, n in enumerate(model.frame_names)}
    for _ in range(states):
        q = model.random_configuration(rng)
        v, a, tau = rng.normal(size=(3, model.nv))
        md.qpos[:], md.qvel[:] = mjx.q_to_mujoco(model, q), mjx.v_to_mujoco(model, q, v)
        md.qacc[:] = mjx.a_to_mujoco(model, q, v, a)
        mujoco.mj_inverse(mm, md)
        err["rnea"] = max(err["rnea"], rel(sd.rnea(model, q, v, a) - mjx.tau_from_mujoco(model, md.qpos, md.qfrc_inverse),
                                           md.qfrc_inverse))
        M = np.zeros((mm.nv, mm.nv))
        mujoco.mj_fullM(mm, md, M)
        T = mjx.velocity_map(model, q)
        err["crba"] = max(err["crba"], rel(sd.crba(model, q) - T.T @ M @ T, M))
        md.qfrc_applied[:] = mjx.tau_to_mujoco(model, q, tau)
        mujoco.mj_forward(mm, md)
        err["aba"] = max(err["aba"], rel(mjx.a_to_mujoco(model, q, v, sd.aba(model, q, v, tau)) - md.qacc, md.qacc))
        if sensors:     # the file's F/T and accelerometer sensors, predicted from MuJoCo's qacc
            a_mj = mjx.a_from_mujoco(model, md.qpos, md.qvel, md.qacc)
            y, _ = sd.EstimationProblem(model, sensors=sensors).measurements(q, v, a_mj)
            y_mj = np.concatenate([md.sensordata[mm.sensor(x.name).adr[0]:][:mm.sensor(x.name).dim[0]]
                                   for x in sensors])
            err["sensors"] = max(err["sensors"], rel(y[y.size - y_mj.size:] - y_mj, y_mj))
        R, p = sd.frame_placements(model, q)
        pairs = [(index.get(f"site:{mm.site(s).name}", index.get(mm.site(s).name or f"site{s}")),
                  md.site_xpos[s], md.site_xmat[s]) for s in range(mm.nsite) if mjx.body_moves(mm, mm.site_bodyid[s])]
        pairs += [(index[mm.body(b).name or f"body{b}"], md.xpos[b], md.xmat[b]) for b in range(1, mm.nbody)
                  if mjx.body_moves(mm, b)]
        for k, x, X in pairs:
            e = max(np.abs(p[k] - x).max(), np.abs(R[k] - X.reshape(3, 3)).max()) / max(1.0, np.abs(md.xpos).max())
            err["frames"] = max(err["frames"], float(e))
    return err


_KEYS = (("tendon", "tendons"), ("transmission", "actuator transmissions"), ("flex", "flexes"),
         ("plugin", "plugins"), ("equality", "equality constraints"), ("mocap", "mocap bodies"),
         ("gravity compensation", "gravcomp"), ("cone limits", "ball cone limits"), ("free joints", "free armature"),
         ("sites fixed to the world", "world sites"))


def _kinds(message):
    """Short list of what a warning names: 'tendons, world sites, sensors (gyro, touch)'."""
    kinds = [label for key, label in _KEYS if key in message]
    m = re.search(r"sensors not mapped to model sensors \((.*)\)", message)
    if m:
        sensors = sorted(set(re.findall(r"(?:^|; )([a-z]+) ", m.group(1))))
        kinds.append(f"sensors ({', '.join(sensors)})")
    return ", ".join(kinds)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=2)
    ap.add_argument("--warnings", action="store_true", help="print each file's full warning after the table")
    args = ap.parse_args(argv)
    import dm_control
    import mujoco
    root = Path(dm_control.__file__).parent
    files = sorted(root.rglob("*.xml"))
    print(f"dm_control {getattr(dm_control, '__version__', '?')} ({len(files)} XML files), MuJoCo {mujoco.__version__}, "
          f"{args.states} random state(s) per file")
    head = f"{'file':58s} {'mujoco':7s} {'loads':6s} {'nv':>4s} {'sens':>4s} {'worst rel. error':>18s}  warned about"
    print(head)
    print("-" * len(head))
    full, worst_all, counts = [], 0.0, {"compiles": 0, "loads": 0, "compared": 0}
    for path in files:
        rel = str(path.relative_to(root))
        try:
            mm = mujoco.MjModel.from_xml_path(str(path))
            compiles = "yes"
            counts["compiles"] += 1
        except Exception:   # noqa: BLE001
            mm, compiles = None, "rejects"
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                model = sd.load_mjcf(path)
                loads = "yes"
            except sd.MjcfError as e:
                model, loads = None, "error" if mm is not None else "MjcfError"
                if mm is not None:
                    full.append((rel, str(e)))
        msgs = [str(x.message) for x in w if issubclass(x.category, sd.MjcfWarning)]
        if model is not None:
            counts["loads"] += 1
        err = ""
        if model is not None and model.nv:
            e = worst_errors(mujoco, model, mm, args.states)
            worst = max(e.values())
            worst_all = max(worst_all, worst)
            counts["compared"] += 1
            err = f"{worst:.1e} ({max(e, key=e.get)})"
        elif model is not None:
            err = "(no dofs)"
        nv = "" if model is None else str(model.nv)
        ns = "" if model is None else str(len(model.sensors))
        print(f"{rel:58s} {compiles:7s} {loads:6s} {nv:>4s} {ns:>4s} {err:>18s}  {_kinds(msgs[0]) if msgs else ''}")
        if msgs:
            full.append((rel, msgs[0]))
    print("-" * len(head))
    print(f"MuJoCo compiles {counts['compiles']} of {len(files)}; sparsedyn loads {counts['loads']} (every file MuJoCo "
          f"compiles: {counts['loads'] == counts['compiles']}); compared with dofs: {counts['compared']}; worst "
          f"relative error over all: {worst_all:.1e}")
    if args.warnings:
        print()
        for rel, msg in full:
            print(f"{rel}: {msg}")


if __name__ == "__main__":
    main()
