"""Steps and collision detection in a scene beside MuJoCo, paired in one process, phase by phase.

    .venv/bin/python benchmarks/bench_scene.py            # the dm_control humanoid lying on the floor, a box
    .venv/bin/python benchmarks/bench_scene.py --repeat 200
    .venv/bin/python benchmarks/bench_scene.py --no-batch-step      # without the batch-step rows (seconds each)
    .venv/bin/python benchmarks/bench_scene.py --cases "talos on the floor" --repeat 1 --no-batch-step --no-rollout
    .venv/bin/python benchmarks/bench_scene.py --cases "talos on a box" --repeat 20 --collide-only   # that row alone

The dm_control suite's humanoid (``sd.Scene(sd.load_mjcf(humanoid.xml, geometry=True))``), dropped in
MuJoCo and settled for 1.5 s so it lies on the floor (and the same with its limits held, as MuJoCo holds
them: read with a body per hinge, its 21 hinges stopped, :func:`sparsedyn.with_joint_stops`), a 0.2 m box
resting on a plane, and talos
(example-robot-data's talos_reduced, 38 dof, its 52 collision shapes with each mesh as its convex hull,
:func:`scene_cases.talos_xml`: the same file in MuJoCo and in the scene) standing on the floor, fallen on it
(1.5 s without torque: lying) and fallen onto a box: microseconds per call, each the fastest of the
timed loops of its phase (:func:`best_us`: on a loaded machine other work only adds time, so the
minimum is robust where a median swings), of

* ``sd.collide(scene, q)`` beside MuJoCo's ``mj_kinematics`` + ``mj_collision`` (hits / ``ncon`` printed:
  MuJoCo counts the robot's self-contacts its contype/conaffinity let through, the scene its own
  pairs), and its phases: the native collision kernel alone (``collision_candidates`` on the scene's
  closed-form pairs, every pair; ``collision_candidates_near``, the rows ``collide`` picks from: the pairs
  within the margin after a broad phase; ``collision_candidates_ahead``, what a step runs: each pair within
  its look-ahead from ``v``, in the same call; ``collide`` runs this one at ``v = 0`` where every pair is
  the kernel's, so a scene builds one) and, for comparison, ``collide`` on the NumPy road (the
  vectorised closed forms);
* ``sd.contact_step(model, q, v, tau, scene, dt)`` on the default road (native, built before the
  timing; the scene's slot layout, grown to what its steps needed) beside ``mj_step``, both at
  MuJoCo's settled state and time step, both from a cold start (MuJoCo's ``qacc_warmstart`` zeroed
  before each call: ``mj_step`` called again from one state starts from its own last solution), and its phases: the step's contact data from the collision
  kernel with its broad phase and look-ahead (``scene_slot_data``, in the slots the step runs in: per body
  where one robot body alone touches, else the scene's data slots; beside it the same data from Contact
  objects within the margin, the general road), the native solve (``contact_step_kernel``, cold, in those
  slots) and the rest (argument checks, the result's modes and checks);
  and the step's one native call where the scene's layout holds its contacts (``scene_step`` of the C
  extension: the collision kernel, the layout and the solve; the rest is then contact_step's less it);
  and the step warm-started from its own impulses at that state beside ``mj_step`` warm-started from its
  last solution (``qacc_warmstart``, as on one ``MjData`` stepping a trajectory); both again beside
  ``mj_step`` with each geom's margin set (up to the scene's) so that its contact count is nearest the
  step's (MuJoCo's contacts within the margin enter its solve, as ours do; at margin 0 it counts only the
  penetrating ones, and its meshes give several contacts where ours give one); and a rollout of a few
  steps from that state, per step (wall,
  and the process's CPU time beside it: what a loaded machine does not inflate) beside MuJoCo's rollout of
  as many steps from that state with its joints' springs and dampers switched off (as ours without
  ``passive=True``), and where the model has springs or dampers (the humanoid's) both rollouts with them
  (ours with ``passive=True`` beside MuJoCo's with ``mjDSBL_EULERDAMP``, ours with ``passive="implicit"``
  beside MuJoCo's default Euler); and a rollout of 400 steps from that state (one run: a trajectory's
  states, not one), per step, beside MuJoCo's limp rollout of as many, with the solver's iterations along
  it;
* the collision kernel on a batch of 1000 states (the joints moved a little; the batch runtime's
  threads) beside a loop of ``mj_kinematics`` + ``mj_collision`` over the same states;
* ``sd.contact_step_derivatives`` (the step and its derivatives) beside ``sd.contact_step`` at the same
  state (the ratio printed) and MuJoCo's ``mjd_transitionFD`` (forward differences of its step), and
  ``sd.contact_step`` followed by ``sd.contact_step_derivatives`` (the step taken twice) beside the latter
  alone, whose ``.step`` is the former's; and both on a batch of the last 100 states of MuJoCo's
  settling, one call each, per state;
* ``sd.contact_step`` on a batch of 1000 states in one call (the batch runtime's threads) beside a loop of
  1000 single calls and a loop of ``mj_step`` over the same states (qpos and qvel set, one step each): the
  states of the collision row (the joints moved 0.05 rad: limbs pressed into the floor) with the settled
  velocity, and the last 1000 states of MuJoCo's own settling (the box: its resting state, repeated).
  Whole-batch wall milliseconds, and ours' process CPU time (on a shared machine the threads may wait);
  and its phases: the contacts of all states laid out in the step's slots (``batch_contacts``:
  one call of the collision kernel with each state's look-ahead) and the solve alone
  (``contact_step_kernel`` on those slots, one call).

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import time
import warnings

import mujoco
import numpy as np

import sparsedyn as sd
from sparsedyn.interop.mujoco import q_from_mujoco, q_to_mujoco, v_from_mujoco
from sparsedyn.contact.collision_kernel import collision_candidates, kernel_plan
from sparsedyn.contact.friction_kernel import MAX_COMPILED_CONTACTS, contact_step_kernel
from sparsedyn.contact.look_ahead import body_reach, step_hits
from sparsedyn.contact.data_slots import data_slots, in_least_slots, runs_per_body
from sparsedyn.contact.friction_problem import DATA_SLOT, ContactSlots
from sparsedyn.contact.scene_batch import batch_contacts
from sparsedyn.contact.scene_data import scene_slot_data
from sparsedyn.contact.scene_fused import fused_step
from sparsedyn.contact.scene_step import scene_contacts, scene_slots
from scene_cases import CASES, settled

BATCH = 1000
ROLLOUT = 20
#: steps of the long rollout row (one run each: its steps are what a trajectory meets, not one state)
LONG = 400
#: states of the derivatives' batch row (the last of MuJoCo's settling)
DERIVATIVE_BATCH = 100
#: at least this many rollouts timed (the fastest kept)
ROLLOUT_RUNS = 10
#: The row of the step's one native call (collision kernel, slot layout and solve: scene_fused)
FUSED = "  one native call (scene_step)"
SPRUNG = "  with its springs (passive=True)"
IMPLICIT = '  with its springs (passive="implicit")'
#: A timed loop lasts at least this long [s] (a phase of a few microseconds runs many calls per loop).
LOOP = 2e-4


def best_us(fn, repeat, clock=time.perf_counter):
    """Microseconds per call of ``fn``: the fastest of ``repeat`` timed loops, each of as many calls as
    last :data:`LOOP` (at least one), on ``clock`` (wall; ``time.process_time``: the process's CPU
    time, which a single-threaded call does not spend waiting for a core).  On a loaded machine other
    work only adds time, so the minimum is what the call costs; a median of single calls swings with
    the load."""
    fn()
    t = clock()
    fn()
    inner = max(1, int(LOOP / max(clock() - t, 1e-9)))
    best = np.inf
    for _ in range(repeat):
        t = clock()
        for _ in range(inner):
            fn()
        best = min(best, (clock() - t) / inner)
    return 1e6 * float(best)


def case(name, xml_path, xml, settle, repeat, batch_step=True, rollout=True, stops=False):
    m, d, trajectory, model = settled(xml_path, xml, settle, stops)   # trajectory: the batch-step rows' states
    scene = sd.Scene(model)
    qpos, qvel = d.qpos.copy(), d.qvel.copy()
    # MuJoCo's layout (quaternion w x y z, a free joint's linear velocity in the world) -> the model's
    q, v = q_from_mujoco(model, qpos), v_from_mujoco(model, qpos, qvel)
    tau, dt = np.zeros(model.nv), m.opt.timestep
    _header(name, model, scene, q, d)
    with sd.use_backend("native", deterministic=True):
        first, times = _step_rows(model, scene, q, v, tau, dt, repeat)
        rollout_cpu = _rollout_times(model, scene, q, v, tau, dt, repeat, times) if rollout else None
        Q = _collision_batch_times(model, scene, q, repeat, times)
    with sd.use_backend("numpy"):
        times["  collide on the NumPy road"] = best_us(lambda: sd.collide(scene, q), repeat)
    qpos_batch = np.array([q_to_mujoco(model, x) for x in Q])
    mj = _mujoco_times(m, d, qpos, qvel, qpos_batch, repeat)
    _print_rows(times, mj, repeat, rollout_cpu)
    _same_count_rows(m, qpos, qvel, scene.margin, len(first.impulses), times, repeat)
    if rollout:
        _long_rollout_row(m, d, model, q, v, tau, dt)
    _derivative_rows(m, model, scene, qpos, qvel, q, v, tau, dt, repeat, _last(trajectory, DERIVATIVE_BATCH))
    if batch_step:
        moved = (qpos_batch, np.repeat(qvel[None], BATCH, 0))
        states = {"the collision row's (joints moved 0.05 rad), the settled v": moved,
                  f"the last {BATCH} states of MuJoCo's settling": _last(trajectory, BATCH)}
        for label, (qp, qv) in states.items():
            _batch_step_rows(label, m, model, qp, qv, dt, max(3, repeat // 20))


def _header(name, model, scene, q, d):
    """The case's line: its hits and contacts at ``q`` (on the NumPy road), MuJoCo's contact count."""
    with sd.use_backend("numpy"):
        hits = sd.collide(scene, q)
        contacts = scene_contacts(scene, q, hits)
    print(f"{name}: nv={model.nv}; sparsedyn hits {len(hits.distances)} ({int(np.sum(hits.distances < 0))} "
          f"penetrating, the others within the margin {scene.margin:g} m; contacts {len(contacts)}, "
          f"per-body slots {len(scene_slots(scene, contacts).frames)}); MuJoCo ncon {d.ncon} (margin 0: penetrating)")


def _step_rows(model, scene, q, v, tau, dt, repeat):
    """``(the first step, {row: us})``: the builds, the step's slots and iterations (printed), then the times of
    ``collide``, the collision kernel's forms, ``contact_step`` cold and warm-started and its phases."""
    t = time.perf_counter()
    sd.contact_step(model, q, v, tau, scene, dt)                        # the builds (timed apart)
    print(f"  first native step (builds): {time.perf_counter() - t:.1f} s")
    # the slots the step ran in (its contacts within the look-ahead, not collide's margin): per body
    # (each body's contacts rounded up to a power of two) or the scene's data slots (data_slots.least_slots)
    print("  the step's slots: " + (f"{len(scene.cache['step_slots'])} bodies, "
                                    f"{sum(scene.cache['step_slots'].values())} per-body slots"
                                    if runs_per_body(scene) else
                                    f"{scene.cache.get('data_slot_count', 0)} data slots") +
          f" (compiled up to {MAX_COMPILED_CONTACTS}; more: the NumPy road)")
    first = sd.contact_step(model, q, v, tau, scene, dt)
    warm_start = first.impulses                    # MuJoCo's d.qacc_warmstart holds its last solution too
    print(f"  solver iterations: {int(first.iterations)} cold, "
          f"{int(sd.contact_step(model, q, v, tau, scene, dt, warm_start=warm_start).iterations)} warm-started")
    ours = {"collide": lambda: sd.collide(scene, q),
            **_collision_kernel_rows(model, scene, q, v, dt),
            "contact_step": lambda: sd.contact_step(model, q, v, tau, scene, dt),
            "contact_step, warm-started": lambda: sd.contact_step(model, q, v, tau, scene, dt, warm_start=warm_start),
            **_phase_rows(model, scene, q, v, tau, dt)}
    return first, {k: best_us(f, repeat) for k, f in ours.items()}


def _collision_kernel_rows(model, scene, q, v, dt):
    """The collision kernel's rows: alone, with the broad phase, with the look-ahead (the step's)."""
    kp = kernel_plan(scene)
    reach, look = body_reach(scene)[0], np.array([scene.margin, dt])
    return {"  collision kernel (one native call)": lambda: collision_candidates(model, q, kp.shapes, kp.pairs),
            "  with the broad phase (near)": lambda: sd.collision_candidates_near(model, q, kp.shapes, kp.cutoff,
                                                                                 kp.pairs),
            "  with the look-ahead (the step's)": lambda: sd.collision_candidates_ahead(model, q, v, kp.shapes, reach,
                                                                                   look, kp.pairs)}


def _phase_rows(model, scene, q, v, tau, dt):
    """The step's phases: its contact data (from the kernel, in the slots the step runs in: per body where one
    body alone touches, else the scene's data slots; and from Contact objects), the native solve, and the
    step's one native call where the layout holds its contacts (robot meshes on a plane: with their rows and
    the look-ahead found before it, in one call of the mesh-plane routine)."""
    inside = not runs_per_body(scene)
    from_kernel = scene_slot_data(scene, q, ahead=(v, dt), data_slots=inside)    # None: a pair of no closed form
    slots = scene_slots(scene, scene_contacts(scene, q, step_hits(scene, q, v, dt))) if from_kernel is None else \
        from_kernel[2] if inside else from_kernel[1]
    if from_kernel is None and inside:
        slots = data_slots(scene, q, slots)
    if from_kernel is None:
        print("  the step's contact data come from Contact objects (pairs of meshes: no closed form in the "
              "collision kernel)")
    settings = np.array([dt, 1e-8, 300.0, 10000.0, 0.005])
    warm = np.zeros((len(slots.frames), 3))
    rows = {"  contact data from the kernel": lambda: scene_slot_data(scene, q, ahead=(v, dt), data_slots=inside),
            "  contact data from Contact objects": lambda: scene_slots(scene, scene_contacts(scene, q, step_hits(
                scene, q, v, dt))),
            "  native solve (contact_step_kernel)": lambda: contact_step_kernel(model, q, v, tau, settings, warm,
                                                                                slots.data, slots.frames)}
    if from_kernel is None:
        del rows["  contact data from the kernel"]
    if fused_step(model, q, v, tau, scene, dt, settings) is not None:
        rows[FUSED] = lambda: fused_step(model, q, v, tau, scene, dt, settings)
    return rows


def _rollout_times(model, scene, q, v, tau, dt, repeat, times):
    """A trajectory's rows (each step warm-started from the matched impulses of the step before) into
    ``times``, and with the joints' springs and dampers where the model has them; returns the plain
    rollout's CPU time a step."""
    runs = max(ROLLOUT_RUNS, repeat // 10)
    roll = lambda: sd.rollout(model, q, v, tau, scene, dt, ROLLOUT)        # noqa: E731
    times[f"rollout, per step ({ROLLOUT} steps)"] = best_us(roll, runs) / ROLLOUT
    if np.any(model.joint_dynamics.stiffness) or np.any(model.joint_dynamics.damping):
        for row, passive in ((SPRUNG, True), (IMPLICIT, "implicit")):
            sd.rollout(model, q, v, tau, scene, dt, ROLLOUT, passive=passive)    # (builds its kernels)
            times[row] = best_us(lambda: sd.rollout(model, q, v, tau, scene, dt, ROLLOUT, passive=passive),
                                 runs) / ROLLOUT
    return best_us(roll, runs, time.process_time) / ROLLOUT


def _collision_batch_times(model, scene, q, repeat, times):
    """The collision kernel on a batch: the settled state with its joints moved a little (the whole batch's
    time into ``times``); returns the batch's states."""
    kp = kernel_plan(scene)
    rng = np.random.default_rng(0)
    Q = np.repeat(q[None], BATCH, 0)
    Q[:, 7:] += 0.05 * rng.standard_normal((BATCH, model.nq - 7)) if model.nq > 7 else 0.0
    Q = np.asarray(sd.normalize(model, Q))                              # (a second free body's quaternion)
    collision_candidates(model, Q, kp.shapes, kp.pairs)                 # builds the batch form
    times[f"collision kernel, {BATCH} states"] = best_us(
        lambda: collision_candidates(model, Q, kp.shapes, kp.pairs), max(3, repeat // 20))
    return Q


def _mujoco_times(m, d, qpos, qvel, qpos_batch, repeat):
    """MuJoCo's rows beside ours: ``{row: (its name, us)}``."""
    d2 = mujoco.MjData(m)

    def mj_collision():
        d2.qpos[:], d2.qvel[:] = qpos, qvel
        mujoco.mj_kinematics(m, d2)
        mujoco.mj_collision(m, d2)

    def mj_step(cold):
        def run():
            d2.qpos[:], d2.qvel[:] = qpos, qvel
            if cold:                         # no warm start from the last call, as contact_step's cold row
                d2.qacc_warmstart[:] = 0
            mujoco.mj_step(m, d2)
        return run

    def mj_collision_loop():
        for x in qpos_batch:
            d2.qpos[:] = x
            mujoco.mj_kinematics(m, d2)
            mujoco.mj_collision(m, d2)

    runs = max(ROLLOUT_RUNS, repeat // 10)
    mj = {"collide": ("mj_kinematics+mj_collision", best_us(mj_collision, repeat)),
          "contact_step": ("mj_step (cold)", best_us(mj_step(True), repeat)),
          "contact_step, warm-started": ("mj_step (warm)", best_us(mj_step(False), repeat))}
    off = mujoco.mjtDisableBit
    mj[f"rollout, per step ({ROLLOUT} steps)"] = ("mj rollout, limp", best_us(_mj_rollout(
        m, d, d2, qpos, qvel, int(off.mjDSBL_SPRING | off.mjDSBL_DAMPER)), runs) / ROLLOUT)
    mj[SPRUNG] = ("mj rollout, EULERDAMP off", best_us(_mj_rollout(m, d, d2, qpos, qvel, int(off.mjDSBL_EULERDAMP)),
                                                       runs) / ROLLOUT)
    mj[IMPLICIT] = ("mj rollout", best_us(_mj_rollout(m, d, d2, qpos, qvel, 0), runs) / ROLLOUT)
    mj[f"collision kernel, {BATCH} states"] = ("mj_collision loop", best_us(mj_collision_loop, max(3, repeat // 20)))
    return mj


def _mj_rollout(m, d, d2, qpos, qvel, off):
    """MuJoCo's rollout of the same steps from the settled state (its last solution the first warm
    start), the flags ``off`` switched off: its joints' springs and dampers (as ours without
    ``passive``), its implicit damping (as ours with ``passive=True``), or none (``"implicit"``)."""
    flags = m.opt.disableflags

    def run():
        m.opt.disableflags = flags | off
        d2.qpos[:], d2.qvel[:], d2.qacc_warmstart[:] = qpos, qvel, d.qacc_warmstart
        for _ in range(ROLLOUT):
            mujoco.mj_step(m, d2)
        m.opt.disableflags = flags
    return run


def _print_rows(times, mj, repeat, rollout_cpu):
    """The table of ``times`` beside MuJoCo's ``mj``, and the rest of ``contact_step`` (its time less its
    phases')."""
    data = times.get("  contact data from the kernel", times["  contact data from Contact objects"])
    solve = times["  native solve (contact_step_kernel)"]
    rest = times["contact_step"] - (times[FUSED] if FUSED in times else data + solve)
    order = ["collide", "  collision kernel (one native call)", "  with the broad phase (near)",
             "  with the look-ahead (the step's)", "  collide on the NumPy road", "contact_step",
             "contact_step, warm-started", f"rollout, per step ({ROLLOUT} steps)", SPRUNG, IMPLICIT, FUSED,
             "  contact data from the kernel", "  native solve (contact_step_kernel)", None,
             "  contact data from Contact objects", f"collision kernel, {BATCH} states"]
    print(f"  times: the fastest timed loop of each phase, per call (load only adds time; {repeat} loops, "
          f"{max(3, repeat // 20)} of {BATCH} states, {max(ROLLOUT_RUNS, repeat // 10)} rollouts); "
          f"the rest: contact_step's minus its phases'")
    print(f"  {'phase':40s} {'sparsedyn':>10s}   {'MuJoCo':28s} {'ratio':>7s}")
    for k in order:
        if k is None:
            print(f"  {'  the rest (checks, modes, wrappers)':40s} {rest:8.1f} us")
            continue
        if k not in times:
            continue
        name, t = mj.get(k, ("", None))
        mj_col = f"{name:17s} {t:7.1f} us" if t else ""
        if k.endswith("states"):
            print(f"  {k:40s} {times[k] / 1e3:8.2f} ms   {name:17s} {t / 1e3:7.2f} ms {times[k] / t:7.2f}")
            continue
        ratio = f"{times[k] / t:7.1f}" if t else ""
        cpu = f"   (cpu {rollout_cpu:.1f} us)" if k.startswith("rollout") else ""
        print(f"  {k:40s} {times[k]:8.1f} us   {mj_col:28s} {ratio}{cpu}")


def collide_rows(name, xml_path, xml, settle, repeat, stops=False):
    """The collide row alone (``--collide-only``): ``sd.collide`` on the default road beside MuJoCo's
    ``mj_kinematics`` + ``mj_collision`` at the settled state, on the wall clock and on the process's
    CPU time (what a loaded machine does not inflate), and ``sd.collide`` on the NumPy road."""
    m, d, _, model = settled(xml_path, xml, settle, stops)
    scene = sd.Scene(model)
    qpos = d.qpos.copy()
    q = q_from_mujoco(model, qpos)
    d2 = mujoco.MjData(m)

    def mj_collision():
        d2.qpos[:] = qpos
        mujoco.mj_kinematics(m, d2)
        mujoco.mj_collision(m, d2)

    with sd.use_backend("native", deterministic=True):
        hits = sd.collide(scene, q)
        print(f"{name}: sparsedyn hits {len(hits.distances)}; MuJoCo ncon {d.ncon}")
        for label, clock in (("wall", time.perf_counter), ("cpu", time.process_time)):
            ours, mj = best_us(lambda: sd.collide(scene, q), repeat, clock), best_us(mj_collision, repeat, clock)
            print(f"  {'collide (' + label + ')':40s} {ours:8.1f} us   {'mj_kinematics+mj_collision':17s} "
                  f"{mj:7.1f} us {ours / mj:7.1f}")
    with sd.use_backend("numpy"):
        print(f"  {'  collide on the NumPy road':40s} {best_us(lambda: sd.collide(scene, q), repeat):8.1f} us")


def _same_count_rows(m, qpos, qvel, margin, ours, times, repeat):
    """``mj_step`` on the same state with every geom's margin set so that MuJoCo's contact count is nearest
    ``ours`` (the step's; MuJoCo's contacts within the margin enter its solve, as ours do), the least such
    margin up to the scene's (``margin``; bisection: the count grows with it), beside our step's rows
    (``times``, microseconds).  MuJoCo's model is restored after."""
    kept = m.geom_margin.copy()
    d = mujoco.MjData(m)

    def count(x):
        m.geom_margin[:] = x
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        return d.ncon
    try:
        lo, hi = 0.0, margin
        if count(hi) >= ours:
            for _ in range(30):                      # the least margin whose count reaches ours
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if count(mid) < ours else (lo, mid)
        best = min((lo, hi), key=lambda x: (abs(count(x) - ours), x))
        ncon = count(best)
        if best == 0.0:
            print(f"  about the same contact count: MuJoCo's own rows above (margin 0, ncon {ncon}; ours {ours})")
            return

        def run(cold):
            def step():
                d.qpos[:], d.qvel[:] = qpos, qvel
                if cold:
                    d.qacc_warmstart[:] = 0
                mujoco.mj_step(m, d)
            return step
        cold, warm = best_us(run(True), repeat), best_us(run(False), repeat)
    finally:
        m.geom_margin[:] = kept
    print(f"  about the same contact count: MuJoCo with each geom's margin {best:.3g} m, ncon {ncon} (ours {ours})")
    for k, name, t in (("contact_step", "mj_step (cold)", cold),
                       ("contact_step, warm-started", "mj_step (warm)", warm)):
        print(f"  {k:40s} {times[k]:8.1f} us   {name:17s} {t:7.1f} us {times[k] / t:7.1f}")


def _long_rollout_row(m, d, model, q, v, tau, dt):
    """``sd.rollout`` of :data:`LONG` steps from the settled state (no torque) beside MuJoCo's limp rollout
    of as many (its joints' springs and dampers off, its last solution the first warm start): one timed
    run each, per step, with the solver's iterations over the trajectory (mean, the most, the steps
    that ran past the ADMM budget: those warn) and how far each trajectory's joints moved.  Ours in a
    scene of its own (a trajectory grows its scene's slot layout, which the other rows' states do not
    need), timed on a second scene after a first run that builds the slot counts the trajectory needs
    (the same steps: each scene starts from the same layout)."""
    flags, d2 = m.opt.disableflags, mujoco.MjData(m)
    off = mujoco.mjtDisableBit
    m.opt.disableflags = flags | int(off.mjDSBL_SPRING | off.mjDSBL_DAMPER)
    d2.qpos[:], d2.qvel[:], d2.qacc_warmstart[:] = d.qpos, d.qvel, d.qacc_warmstart
    t = time.perf_counter()
    for _ in range(LONG):
        mujoco.mj_step(m, d2)
    mj = (time.perf_counter() - t) / LONG * 1e6
    m.opt.disableflags = flags
    with warnings.catch_warnings(record=True) as caught, sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        sd.rollout(model, q, v, tau, sd.Scene(model), dt, LONG)                   # (builds)
        warnings.simplefilter("always", sd.ContactStepWarning)
        t = time.perf_counter()
        r = sd.rollout(model, q, v, tau, sd.Scene(model), dt, LONG)
        ours = (time.perf_counter() - t) / LONG * 1e6
    it = np.asarray(r.iterations)
    moved = (np.abs(r.q[-1][7:] - q[7:]).max(initial=0.0), np.abs(d2.qpos[7:] - d.qpos[7:]).max(initial=0.0))
    late = sum(issubclass(w.category, sd.ContactStepWarning) for w in caught)
    print(f"  {f'rollout, per step ({LONG} steps, one run)':40s} {ours:8.1f} us   {'mj rollout, limp':17s} {mj:7.1f} us "
          f"{ours / mj:7.1f}")
    print(f"    iterations mean {it.mean():.1f}, most {it.max()}, steps past the budget (warned) {late}; the "
          f"joints moved at most {moved[0]:.2f} rad over it (MuJoCo's {moved[1]:.2f})")


def _derivative_rows(m, model, scene, qpos, qvel, q, v, tau, dt, repeat, states):
    """``sd.contact_step_derivatives`` (the step and its derivatives in ``q``, ``v``, ``tau``) beside
    ``sd.contact_step`` at the same state, on the default road (built before the timing), and MuJoCo's
    ``mjd_transitionFD`` (its step's derivatives by forward differences: ``2 nv + nu + 1`` steps) for
    scale; the time of the cold build of the derivatives' kernel where it was not in the cache.  And
    both on a batch of MuJoCo's ``states`` ``(qpos, qvel)`` (the last of its settling) in one call each,
    per state, in a scene of their own (their slot layout)."""
    d = mujoco.MjData(m)
    A, Bm = np.zeros((2 * m.nv + m.na, 2 * m.nv + m.na)), np.zeros((2 * m.nv + m.na, m.nu))   # (na: activations)

    def mj_fd():
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mjd_transitionFD(m, d, 1e-6, False, A, Bm, None, None)

    with sd.use_backend("native", deterministic=True):
        t = time.perf_counter()
        sd.contact_step_derivatives(model, q, v, tau, scene, dt)
        first = time.perf_counter() - t
        step = best_us(lambda: sd.contact_step(model, q, v, tau, scene, dt), repeat)
        deriv = best_us(lambda: sd.contact_step_derivatives(model, q, v, tau, scene, dt), repeat)
        both = best_us(lambda: (sd.contact_step(model, q, v, tau, scene, dt),
                                  sd.contact_step_derivatives(model, q, v, tau, scene, dt)), repeat)
    fd = best_us(mj_fd, max(3, repeat // 10))
    print(f"  {'contact_step_derivatives':40s} {deriv:8.1f} us   {'mjd_transitionFD':17s} {fd:7.1f} us "
          f"{deriv / fd:7.1f}   ({deriv / step:.1f}x contact_step, {step:.1f} us; first call {first:.1f} s)")
    # a loop needing the step and its derivatives calls contact_step_derivatives alone (its .step is
    # contact_step's); calling both takes the step twice
    print(f"  {'contact_step + contact_step_derivatives':40s} {both:8.1f} us   "
          f"(contact_step_derivatives alone, its .step the step: {deriv / both:.2f}x of it)")
    batch = sd.Scene(model)
    Q = np.array([q_from_mujoco(model, x) for x in states[0]])
    V = np.array([v_from_mujoco(model, x, y) for x, y in zip(*states)])
    n = len(Q)
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        sd.contact_step_derivatives(model, Q, V, tau, batch, dt)         # grows the layout, builds its kernels
        step = best_us(lambda: sd.contact_step(model, Q, V, tau, batch, dt), max(3, repeat // 5)) / n
        deriv = best_us(lambda: sd.contact_step_derivatives(model, Q, V, tau, batch, dt), max(3, repeat // 5)) / n
    print(f"  {f'contact_step_derivatives, {n} states':40s} {deriv:8.1f} us a state, one call   "
          f"({deriv / step:.1f}x contact_step's batch, {step:.1f} us a state)")


def _last(trajectory, n):
    """The last ``n`` states ``(qpos (n, nq), qvel (n, nv))`` of ``trajectory`` (repeated when shorter)."""
    take = [trajectory[-1 - (k % len(trajectory))] for k in range(n)][::-1]
    return np.array([x for x, _ in take]), np.array([y for _, y in take])


def _batch_step_rows(label, m, model, qpos, qvel, dt, repeat):
    """``sd.contact_step`` on a batch of states (one call) beside a loop of single calls and a loop of
    ``mj_step`` (qpos, qvel set, one step each) over the same states: whole-batch wall milliseconds (the
    fastest of ``repeat``) and, for ours, the process's CPU milliseconds (both threads).  A scene of its
    own: its slot layout is what these states need (free slots cost time).  MuJoCo's loop on one ``MjData``
    warm-starts each state from the one before (``qacc_warmstart``), which on consecutive states of its
    settling is nearly its answer; ours solves each state of a batch cold, so the loop is also timed with
    each state cold (the ratio of our one call to it)."""
    scene = sd.Scene(model)
    Q = np.array([q_from_mujoco(model, x) for x in qpos])
    V = np.array([v_from_mujoco(model, x, y) for x, y in zip(qpos, qvel)])
    tau = np.zeros(model.nv)
    d = mujoco.MjData(m)

    def mj_loop(cold=False):
        for x, y in zip(qpos, qvel):
            d.qpos[:], d.qvel[:] = x, y
            if cold:                       # each state alone (a batch's states are independent)
                d.qacc_warmstart[:] = 0
            mujoco.mj_step(m, d)

    def timed(fn):
        wall, cpu = [], []
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall.append(time.perf_counter() - t), cpu.append(time.process_time() - c)
        return 1e3 * float(np.min(wall)), 1e3 * float(np.min(cpu))

    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        s = sd.contact_step(model, Q, V, tau, scene, dt)                 # grows the layout, builds its step
        ours = timed(lambda: sd.contact_step(model, Q, V, tau, scene, dt))
        singles = timed(lambda: [sd.contact_step(model, Q[i], V[i], tau, scene, dt) for i in range(len(Q))])
        # its phases: the contacts of all states laid out (one call of the collision kernel), the solve
        def lay_out():                     # as the step does: its slots (per body, or the data slots)
            got = batch_contacts(scene, Q, None, (V, dt), data_slots=not runs_per_body(scene))
            return got.laid if got.laid is not None else ContactSlots(got.frames, None, got.data)
        slots = lay_out()
        settings, warm = np.array([dt, 1e-8, 300.0, 10000.0, 0.005]), np.zeros(slots.data.shape[:2] + (3,))
        data = timed(lay_out)
        # as the step runs it: in data slots each state in the least count that holds its contacts
        def kernel(q, v, tau, warm, slots):
            return contact_step_kernel(model, q, v, tau, settings, warm, slots.data, slots.frames)
        solve = timed(lambda: in_least_slots(kernel, Q, V, tau, warm, slots) if slots.frames[0] == DATA_SLOT else
                      kernel(Q, V, tau, warm, slots)) if len(slots.frames) else (0.0, 0.0)
    mj_loop()
    mj = timed(mj_loop)
    mj_cold = timed(lambda: mj_loop(cold=True))
    counts = [len(x) for x in s.impulses]
    print(f"  batch step, {len(Q)} states: {label} (the fastest of {repeat} calls)")
    print(f"    contacts per state {np.mean(counts):.1f} (max {max(counts)}), slots {len(scene.cache['step_slots'])} "
          f"bodies / {sum(scene.cache['step_slots'].values())} slots, iterations mean {s.iterations.mean():.0f} "
          f"(max {s.iterations.max()})")
    print(f"    {'contact_step, one call':38s} {ours[0]:9.1f} ms (cpu {ours[1]:8.1f} ms)   "
          f"mj_step loop {mj[0]:7.1f} ms {ours[0] / mj[0]:7.2f}")
    print(f"    {'contact_step, a loop of single calls':38s} {singles[0]:9.1f} ms (cpu {singles[1]:8.1f} ms)   "
          f"mj_step loop {mj[0]:7.1f} ms {singles[0] / mj[0]:7.2f}")
    print(f"    {'  (mj_step loop, each state cold: qacc_warmstart zeroed)':62s} {mj_cold[0]:7.1f} ms "
          f"{ours[0] / mj_cold[0]:7.2f}")
    print(f"    {'  contacts laid out (collision kernel)':38s} {data[0]:9.1f} ms (cpu {data[1]:8.1f} ms)")
    print(f"    {'  the solve (contact_step_kernel)':38s} {solve[0]:9.1f} ms (cpu {solve[1]:8.1f} ms)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--no-batch-step", action="store_true", help="leave out the batch-step rows (seconds each)")
    p.add_argument("--no-rollout", action="store_true", help="leave out the rollout row")
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES), help="the scenes to run")
    p.add_argument("--collide-only", action="store_true", help="the collide row alone (seconds a case)")
    a = p.parse_args()
    for name in a.cases:
        path, xml, settle, *stops = CASES[name]()
        if a.collide_only:
            collide_rows(name, path, xml, settle, a.repeat, *stops)
        else:
            case(name, path, xml, settle, a.repeat, not a.no_batch_step, not a.no_rollout, *stops)


if __name__ == "__main__":
    main()
