"""One-sided frictional contact and time stepping: robots that touch the world.

A one-sided contact (:class:`~sparsedyn.model.sensors.Contact` with ``kind="3d"``, ``friction=mu``,
``point=p``, ``plane=(n, offset)``) is a point ``p`` fixed in a frame of the robot (frame axes;
default the frame's origin) against the plane ``{x : n . x = offset}`` (default the ground z = 0)
with Coulomb friction ``mu >= 0`` (``mu = 0``: a frictionless one-sided contact).  Its *contact
frame* has z along the plane's unit normal and x, y tangent (world x and y for a horizontal plane;
otherwise x is the world x axis, or y if x is nearly normal, projected onto the plane, and
y = z cross x).  Impulses and contact velocities are expressed in it, three numbers per contact
``[t_x, t_y, n]``, applied *on the robot*.

**The step** (semi-implicit Euler, velocity level, as Moreau's time stepping; Stewart and
Trinkle, "An implicit time-stepping scheme for rigid body dynamics with inelastic collisions
and Coulomb friction", 1996)::

    v_free = v + dt H^-1 (tau - C(q, v))              free motion (CRBA, branch-sparse LTDL)
    u      = J v_free + b + G lambda                  contact velocities after the step
    G      = J H^-1 J^T                               the Delassus matrix (m x m, m = 3 contacts)
    v+     = v_free + H^-1 J^T lambda,     q+ = q (+) dt v+

with one change for a free joint (:mod:`~sparsedyn.contact.transport`): its velocity is solved in the
body's axes at the start of the step, its linear velocity held in the world (``v_free`` gains
``dt [0; omega x v]``) and its body's gyroscopic term taken backward, and ``v+`` is that velocity
in the axes after the step; so a rolling sphere keeps its speed and a body spinning in the air gains
no energy,

where ``b`` is zero but for the normal entry of a contact above the plane by more than ``TOUCHING_GAP``
(5 um): ``gap / dt`` (a *speculative* contact: the point may close its gap within the step, not more, so a
contact above the plane by more than it can travel in ``dt`` is open, and a falling robot does not pass
through the ground; a smaller gap is touching: a push of a few micrometres per step, which a load-bearing
point of a redundant, jointed contact set can only follow by slipping at the edge of its friction cone, is
a degenerate problem the solver creeps on).  ``lambda`` solves the nonlinear complementarity problem of
Coulomb's law with De Saxcé's correction ``Phi(u) = [0, 0, mu |u_t|]`` (exact Coulomb friction: maximal
dissipation, no spurious normal velocity while sliding; De Saxcé and Feng, "The bipotential
method", 1998)::

    K_mu  ∋  lambda   ⊥   u + Phi(u)  ∈  K_mu*         per contact, K_mu = {|l_t| <= mu l_n}

**The solver** is ADMM on this problem (Carpentier, Le Lidec, Montaut, "From compliant to rigid
contact simulation: a unified and efficient approach", 2024): the x-step solves
``(G + (eta + rho) I) x = -(g + s) + eta x_prev + rho z - y`` with the proximal term ``eta``, the
z-step projects onto the friction cones, De Saxcé's shift ``s = [0, 0, mu |y_t|]`` is taken from the
multiplier ``y`` (the iterate's estimate of ``-(u + Phi(u))``; taken from ``G z + g`` instead, the
iteration stalls on redundant contact sets such as eight sole corners, where ``G`` is singular), and
the penalty ``rho`` adapts to the ratio of primal and dual residuals, and each iterate is extrapolated
by safeguarded Anderson acceleration (Walker and Ni, "Anderson acceleration for fixed-point
iterations", 2011; Zhang, O'Donoghue and Boyd, "Globally convergent type-I Anderson acceleration for
nonsmooth fixed-point iterations", 2020): on the redundant, badly conditioned contact sets of a
humanoid's limbs on the floor it cuts ADMM's iterations four- to fivefold (the reasons for each
choice are in :mod:`~sparsedyn.contact.friction_kernel`).  Once the iterate's contact modes (open,
sticking, sliding) hold, a *polish* solves the linear system those modes fix and takes its answer
where Coulomb's law holds to ``tol`` (:mod:`~sparsedyn.contact.friction_polish`; the humanoid lying
on the floor: 41 iterations to 3 and one polish); a start is polished first, a cold one from the guess
that each contact its free velocity closes sticks (the humanoid lying there: that polish alone).  A
state that ADMM has not solved in ``ADMM_BUDGET`` iterations, or where it stalls, continues with projected
Gauss-Seidel (also the option ``solver="pgs"``), and its last sweep, where they stall short of ``tol``, is polished.

The iteration count depends on the values, so the whole step is an *iterative kernel*
(:mod:`sparsedyn.symbolic.loop`), :func:`contact_step_kernel`: straight-line stages (the problem
with :func:`contact_problem`; ``(G + (eta + rho) I)^-1`` from its Cholesky factor, again when
``rho`` changes; one ADMM iteration; one Gauss-Seidel sweep; one sweep of the position correction;
the next state) that the compiler runs in a loop steered by the stages' flags: one native call per
state, a batch on the batch runtime's threads (a small contact set's states a vector's lanes at a
time, each its own iterations: :mod:`~sparsedyn.codegen.emit_iterative_vec`).  The NumPy reference (under
``sd.use_backend("numpy")``) runs the same stage functions on floats in the same loop, so the two
roads make the same iterations and agree to rounding.  The kernel is built per tuple of contact
frames; the friction coefficients, the points and the planes are its data, so new values (a
contact set found by collision detection at each step) never rebuild it.

**Penetration** (left by the linearised kinematics of a rotating body, or by solver tolerance)
is removed from the *configuration only*: a normal pseudo-velocity ``dv = H^-1 J_n^T lambda'``
with ``lambda' >= 0 ⊥ G_nn lambda' + gap / dt >= 0`` moves the penetrating points back onto the
plane (the split-impulse method of position correction), and ``v+`` is left as the contact
solution made it; so the correction adds no kinetic energy (the potential energy it returns is
the one the penetration took).  A load-bearing contact within ``TOUCHING_GAP`` of its plane
(not penetrating past ``PENETRATION_SLOP``) is *held* by the correction within half the slop of its
plane (``lambda'`` may then pull): pushing one point out would otherwise lift a jointed body's other
resting points, step after step, until their gaps asked for a push
(:mod:`~sparsedyn.contact.correction`).

Residuals of a solution ``lambda`` (the largest over the contacts): ``primal`` the ADMM consensus
``|x - z|`` [N s] (0 for PGS, whose iterates are in the cones), ``dual`` the distance of
``u + Phi(u)`` from the dual cone [m/s], ``complementarity`` ``|lambda . (u + Phi(u))|`` [J].  The
solve stops when they are below ``tol`` times the impulse scale (the largest impulse), the velocity
scale (the largest free velocity of a closing contact, tangential or normal: not an open speculative
contact's ``gap / dt``) and their product (:mod:`~sparsedyn.contact.friction_residuals`).

This module holds the step and the rollout (:mod:`~sparsedyn.contact.friction_kernel`: the solver).
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Callable

import numpy as np

from .. import _checks
from ..algorithms.configuration import integrate
from ..kernels import model_method, native_calls, use_backend
from ..model.topology import model_store
from ..model.sensors import Contact
from .friction_kernel import contact_step_kernel
from .friction_problem import (ADMM_BUDGET, SOLVERS, ContactProblem, ContactResiduals, ContactStep,
                               DATA_SLOT, ContactStepWarning, Rollout, StepArrays, _model_and_kernels, _modes, _positive,
                               contact_basis, contact_problem, contact_slots, point_contacts)
from .lazy_modes import LazyModesRollout, LazyModesStep, _Modes, _TrajectoryModes
from .passive_step import IMPLICIT, implicit_damping, passive_flag, passive_inputs, vector_springs, with_passive
from . import scene_data
from .data_slots import MIN_DATA_SLOTS, data_slot_count, data_slots_used, in_least_slots, steps_to_shrink
from .scene import Scene
from .rollout_rows import append_chain, rollout_rows, stacked_states
from .scene_fused import (chained_step, chained_steps, fused_step, general_matching, mixed_call, step_candidates,
                          trajectory_plan)
from .scene_step import FoundContacts, batch_previous, batch_states, step_in_scene
from .transport import gyroscopic, to_next_axes, transport

__all__ = ["ContactProblem", "ContactStep", "StepArrays", "contact_step_kernel", "ContactResiduals", "ContactStepWarning",
           "Rollout", "contact_problem", "contact_step", "rollout", "point_contacts", "contact_basis", "SOLVERS"]

# --- the step ------------------------------------------------------------------------------------

_F64, _NONE, _STEP = np.dtype(float), {}, contact_step_kernel.__name__
_ROAD, _FUSED = "contact_step road", fused_step


def _frictional(model, contacts, who):
    """``(contacts, contact_slots(contacts))``: :func:`point_contacts` with ``friction`` and their slots,
    remembered in the model's :func:`~sparsedyn.model.topology.model_store` for its last few contact sets (a
    step checks its contacts once per trajectory, not once per step)."""
    checked_sets = model_store(model, "frictional contacts")
    try:
        key = tuple(contacts) if not isinstance(contacts, Contact) else (contacts,)
        hit = checked_sets.get(key)
    except TypeError:
        key = hit = None
    if hit is not None:
        return hit
    checked = point_contacts(model, contacts, who, friction=True)
    checked = (checked, contact_slots(model, checked))
    if key is not None:
        if len(checked_sets) >= 64:
            checked_sets.clear()
        checked_sets[key] = checked
    return checked


def _options(options, warm_start):
    """:func:`contact_step`'s options for :func:`_slotted_step` (its defaults where not given; not ``passive``)."""
    out = dict(contact_step.__kwdefaults__)       # (an inspect.signature costs more than a step)
    out.update(options)
    del out["passive"]
    out["warm_start"] = warm_start
    return out


@model_method
def contact_step(model, q, v, tau, contacts, dt, *, tol=1e-8, max_iterations=None, solver="admm", f_ext=None,
                 gravity=None, warm_start=None, margin=0.005, passive=False):
    """One time step of a robot with one-sided frictional point contacts (a :class:`ContactStep`).

    ``model``: a :class:`~sparsedyn.Model` (the per-state kernel then takes the road of every plain
    call: native once built) or ``sd.compile(model)`` (compiled now; microseconds instead of the
    NumPy path's milliseconds);
    ``q`` (..., nq), ``v``/``tau`` (..., nv): the state and the joint forces held over the step;
    ``contacts``: point contacts ``Contact(frame, "3d", friction=mu, point=p, plane=(n, offset))``
    (``mu >= 0``, 0: frictionless; ``point`` in the frame's axes, default its origin; ``plane`` default the ground
    z = 0); ``dt`` > 0 [s].  ``tol``: the residuals' stopping test, relative to the impulse and
    velocity scales of the problem (``max |lambda|`` and the closing contacts' ``max |J v_free|``); ``max_iterations``
    (default 1000 for ADMM, 10000 for PGS): after it a :class:`ContactStepWarning` gives the
    residuals; ``solver``: ``"admm"`` (states that ADMM has not solved in ``ADMM_BUDGET`` iterations continue
    with Gauss-Seidel while it gains, up to ``10 max_iterations`` sweeps) or ``"pgs"``; ``f_ext`` (..., NB, 6), ``gravity`` (3,) as in
    :func:`~sparsedyn.aba`; ``warm_start`` (..., nc, 3): impulses to start from (the previous
    step's ``impulses`` along a trajectory); ``margin`` [m]: a contact point that would stay higher
    than this above its plane at the end of the step if it kept its free velocity is open and left
    out of the solve; ``passive``: add the model's joint springs and dampers
    (:func:`~sparsedyn.passive_forces`, taken at ``(q, v)``: :mod:`~sparsedyn.contact.passive_step`) to ``tau``,
    ``"implicit"``: with the dampers at ``v+`` (MuJoCo's default Euler: stable for any damping).

    The next state is ``v+ = v + dt H^-1 (tau - C) + H^-1 J^T impulses``, ``q+ = q (+) dt v+`` (semi-implicit
    Euler), the impulses the solution of Coulomb's law with De Saxcé's correction; the method (and
    the position correction of a penetrating point) is in the module docstring.  With ``solver="admm"``
    the whole step is the kernel :func:`contact_step_kernel` (``solver="pgs"`` the same kernel with no
    ADMM iteration): on a model (native by default, like the other plain calls) or ``sd.compile(model)``
    one native call per state (a batch runs state by state on the batch runtime's threads), under
    ``sd.use_backend("numpy")`` the same stages on floats, state by state.  It is built once per tuple
    of contact frames; new friction coefficients, points and planes are data.

    >>> import numpy as np, sparsedyn as sd
    >>> b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=1.0,
    ...                                      rot_inertia=np.eye(3) / 60)
    >>> model = b.add_frame("box", "box").build()
    >>> corners = [sd.Contact("box", "3d", friction=0.5, point=(x, y, -0.1), name=f"c{i}")
    ...            for i, (x, y) in enumerate([(-.1, -.1), (.1, -.1), (-.1, .1), (.1, .1)])]
    >>> q = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
    >>> step = sd.contact_step(model, q, np.zeros(6), np.zeros(6), corners, 1e-3)
    >>> bool(np.allclose(step.v, 0, atol=1e-10)), step.modes.tolist()
    (True, ['stick', 'stick', 'stick', 'stick'])

    ``contacts`` may be a :class:`~sparsedyn.Scene`: the contacts are then those :func:`~sparsedyn.collide`
    finds at ``q``, between the robot and the world and between two of the robot's bodies (self-collision:
    the impulse acts on the pair's first shape and the opposite one on the second)
    (:mod:`~sparsedyn.contact.scene_step`; on the default road: a new build per count of data slots, or where
    one robot body alone can touch, when it outgrows its contact slots).  ``q`` is then one state (nq,) or
    a batch (B, nq) (one call of the step for the batch; ``impulses`` and ``modes`` are then sequences of
    one array per state, each made when read, and ``warm_start`` a list of each state's impulses).
    """
    if passive is not False:                      # (implicit dampers: a model of its own, its scene)
        model, tau, contacts = passive_inputs("contact_step", model, q, v, tau, contacts, dt, passive)
    if type(contacts) is Scene and model is contacts.model:     # (then a model: no check of the first argument)
        if f_ext is None and gravity is None:
            # collision, layout and solve in one native call where the scene's layout holds the contacts:
            # the call and its settings looked up at once (_road_of), the arrays handed over as given (the
            # call declines any but one state's finite float64 arrays: then the roads below say why)
            road = _road_of(model, contacts, dt, tol, max_iterations, solver, margin)
            if not type(q) is type(v) is type(tau) is np.ndarray:   # (plain lists of numbers take the road too)
                q, v, tau = _checks.flat_floats(q, v, tau)
            if road is not None and type(q) is type(v) is type(tau) is np.ndarray and (
                    warm_start is None or type(warm_start) is np.ndarray):
                got = road[1](road[2], q, v, tau, road[3], warm_start)
            else:
                got = fused_step(model, q, v, tau, contacts, dt, _step_settings(
                    "contact_step", dt, tol, max_iterations, solver, margin), warm_start) if \
                    type(dt) is float and 0 < dt < math.inf else None
            if got is not None:          # (the kernel's fast path gave finite arrays)
                if contacts.cache.get("data_slot_count", 0) > MIN_DATA_SLOTS:      # (its contacts counted)
                    data_slots_used(contacts, (len(got[0][2]) if got[1] is None else len(got[1]),))
                return _one_step(got[0], got[1], solver, tol)
    options = dict(tol=tol, max_iterations=max_iterations, solver=solver, f_ext=f_ext, gravity=gravity,
                   warm_start=warm_start, margin=margin)
    _checks.model_first("contact_step", model, "model, q, v, tau")
    if isinstance(contacts, Scene):
        return step_in_scene(_slotted_step, model, q, v, tau, contacts, dt, options)[0]
    contacts, slots = _frictional(_model_and_kernels(model, "contact_step")[0], contacts, "contact_step")
    return _slotted_step(model, q, v, tau, contacts, slots, dt, **options)


def _road_of(model, scene, dt, tol, max_iterations, solver, margin):
    """:func:`_road`'s entry for a step of ``model`` (the scene's own) in ``scene`` with these options,
    looked up as :func:`contact_step` looks it up, or None where the road does not apply now (the
    NumPy backend among the reasons)."""
    cache = scene.cache
    # (one road per count of data slots, as the fused plans: the count follows the contacts down too)
    layout, roads, n = cache.get("step_slots"), cache.get(_ROAD), cache.get("data_slot_count", 0)
    road = roads and roads.get(n)
    key = layout and (dt, tol, max_iterations, solver, margin, len(layout), sum(layout.values()),
                      n, scene_data.STEP_CAPACITY)
    if road is None or road[0] != key or not (type(dt) is type(tol) is type(margin) is float) or \
            type(max_iterations) is bool:
        road = _road(model, scene, key, dt, tol, max_iterations, solver, margin)
    return road if road is not None and road[1] is not None and fused_step is _FUSED and \
        use_backend.current() != "numpy" else None


def _road(model, scene, key, dt, tol, max_iterations, solver, margin):
    """The fused road of :func:`contact_step` in ``scene`` with these options (checked here):
    ``(key, scene_step, its plan, the kernel's settings, the fused plan)`` (the last:
    :func:`~sparsedyn.contact.scene_fused.trajectory_plan`'s) kept in ``scene.cache`` while ``key`` (the
    options, the slot layout's size, the data slots' count and the capacity: what the plan of
    :func:`~sparsedyn.contact.scene_fused.trajectory_plan` depends on but the model's native callables,
    which stay once built) stays (for a scene whose candidates are found before the call, its
    ``scene_step`` is :func:`~sparsedyn.contact.scene_fused.mixed_call`'s, which finds them first); None
    where there is no plan now or the options are not plain floats."""
    if not (key and type(dt) is type(tol) is type(margin) is float and (
            max_iterations is None or type(max_iterations) is int)):
        return None
    settings = _step_settings("contact_step", dt, tol, max_iterations, solver, margin)      # (raises on bad values)
    plan = trajectory_plan(scene, model, dt)
    if plan is None:
        return None
    # (a mixed plan: its candidates found before the call, in the call the road keeps)
    road = scene.cache.setdefault(_ROAD, {})[key[7]] = \
        (key, plan[0] if plan[4] is None else mixed_call(scene, plan, dt), plan[1], settings, plan)
    return road


def _slotted_step(model, q, v, tau, contacts, slots, dt, *, tol, max_iterations, solver, f_ext, gravity, warm_start,
                  margin, keep=None, warm_checked=False, bare=False):
    """:func:`contact_step` with checked ``contacts`` laid out in ``slots`` (a
    :class:`~sparsedyn.contact.friction_problem.ContactSlots`); ``keep``: a list that receives
    ``(the kernel's StepArrays, slots)`` (the arrays in the slots; nothing for a step with no slot), whose
    position correction the derivatives read; ``warm_checked``: whether ``warm_start`` is known to be
    finite impulses (nc, 3) (a trajectory's, matched from the step before's); ``bare``: one state's
    step as the plain tuple of :func:`_result` (what a rollout keeps of it)."""
    who = "contact_step"
    model, kernels = _model_and_kernels(model, who)
    if not (type(q) is type(v) is type(tau) is np.ndarray and q.dtype is v.dtype is tau.dtype is _F64):
        q, v, tau = (x if type(x) is np.ndarray and x.dtype == np.float64 else          # (converted once)
                     _checks.plain_floats(who, n, x, f"(..., {size})")
                     for n, x, size in (("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)))
    settings = _step_settings(who, dt, tol, max_iterations, solver, margin)
    if warm_start is not None and not warm_checked:
        nc = len(contacts)
        if not (type(warm_start) is np.ndarray and warm_start.dtype is _F64):
            warm_start = _checks.numeric("warm_start", warm_start, f"impulses of shape (..., {nc}, 3)")
        # one state: a finite sum says all are finite (else, or an overflow of the sum, look at each)
        if warm_start.shape[-2:] != (nc, 3) or not (
                warm_start.ndim == 2 and math.isfinite(sum(warm_start.ravel().tolist()))
                or np.isfinite(warm_start).all()):
            what = f"shape {warm_start.shape}" if warm_start.shape[-2:] != (nc, 3) else "NaN or infinite values"
            raise ValueError(f"{who}: warm_start must be finite impulses of shape (..., {nc}, 3), got {what}")
    if not len(slots.frames):                     # no slot (a scene may hold free slots only)
        return _free_step(model, kernels, q, v, tau, settings[0], f_ext, gravity)
    # q, v, tau, f_ext and gravity are checked by the kernel (compiled or NumPy), as by every kernel
    same = slots.index is None                   # the contacts fill their slots in order
    if warm_start is None:
        warm = np.zeros((len(slots.frames), 3))
    elif same:
        warm = warm_start
    elif warm_start.ndim == 2:                    # one state (its rows put at once)
        warm = np.zeros((len(slots.frames), 3))
        warm[slots.index] = warm_start
    else:
        warm = np.zeros(warm_start.shape[:-2] + (len(slots.frames), 3))
        warm[..., slots.index, :] = warm_start
    if f_ext is None and gravity is None:         # all by position: the native callable's own fast call
        # the ready native callable straight away (as the public function would call it, less its frame)
        f = (native_calls(kernels) or _NONE).get(_STEP) if type(slots.frames) is tuple else None
        f = f if use_backend.current() != "numpy" else None

        def run(q, v, tau, warm, slots):
            if f is not None:
                return tuple.__new__(StepArrays, f(q, v, tau, settings, warm, slots.data, slots.frames))
            return contact_step_kernel(kernels, q, v, tau, settings, warm, slots.data, slots.frames)
        # a batch in data slots: each state in the slots it needs (the others' free slots cost time)
        batch = keep is None and q.ndim == 2 and slots.frames[0] == DATA_SLOT
        out = in_least_slots(run, q, v, tau, warm, slots) if batch else run(q, v, tau, warm, slots)
    else:
        out = contact_step_kernel(kernels, q, v, tau, settings, warm, slots.data, slots.frames, f_ext=f_ext,
                                  gravity=gravity)
    if keep is not None:
        keep.append((out, slots))
    return _result(who, solver, tol, out, None if same else slots.index, bare)


def _step_settings(who, dt, tol, max_iterations, solver, margin):
    """The kernel's ``settings`` (5,) ``[dt, tol, ADMM iterations, Gauss-Seidel sweeps, margin]`` of
    :func:`contact_step`'s arguments, checked (read-only; remembered for plain floats, ints and names)."""
    if type(dt) is float and type(tol) is float and type(margin) is float and type(solver) is str and \
            (max_iterations is None or type(max_iterations) is int):
        return _plain_settings(who, dt, tol, max_iterations, solver, margin)
    return _checked_settings(who, dt, tol, max_iterations, solver, margin)


@functools.lru_cache(maxsize=64)
def _plain_settings(who, dt, tol, max_iterations, solver, margin):
    """:func:`_checked_settings` of plain Python values (a trajectory checks them once)."""
    return _checked_settings(who, dt, tol, max_iterations, solver, margin)


def _checked_settings(who, dt, tol, max_iterations, solver, margin):
    dt, tol, margin = (_positive(who, n, x) for n, x in (("dt", dt), ("tol", tol), ("margin", margin)))
    if solver not in SOLVERS:
        raise ValueError(f"{who}: solver must be one of {SOLVERS}, got {solver!r}")
    if max_iterations is None:
        max_iterations = 1000 if solver == "admm" else 10000
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, (int, np.integer)) or max_iterations < 1:
        raise ValueError(f"{who}: max_iterations must be an integer >= 1, got {max_iterations!r}")
    budget = (min(int(max_iterations), ADMM_BUDGET), 10.0 * max_iterations) if solver == "admm" else \
        (0, float(max_iterations))
    settings = np.array([dt, tol, *budget, margin], float)
    settings.flags.writeable = False
    return settings


def _free_step(model, kernels, q, v, tau, dt, f_ext, gravity):
    """The step without contacts: the free motion."""
    q, v, tau, f_ext, _, _, _ = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau", "nv joint forces")
    P = contact_problem(kernels, q, v, tau, (), f_ext=f_ext, gravity=gravity)
    w = v + dt * (P.a + transport(model, v)) + gyroscopic(model, v, dt)        # module transport
    shape = w.shape[:-1]
    return ContactStep(integrate(kernels, np.broadcast_to(q, shape + (model.nq,)), dt * w), to_next_axes(model, w, dt),
                       np.zeros(shape + (0, 3)), np.zeros(shape + (0,), dtype="<U5"),
                       ContactResiduals(*(np.zeros(shape),) * 3), np.zeros(shape, int))


def _result(who, solver, tol, out, index=None, bare=False, finite=False):
    """The :class:`ContactStep` of the kernel's arrays ``out`` (a warning where the solver stopped early; never a
    NaN); ``index`` (nc,): the contacts' slots (None: slot ``i`` holds contact ``i``, no other).  One state's modes
    are computed when first read; with ``bare``, one state's step is the tuple ``(q, v, impulses, modes,
    iterations)`` (its modes a :class:`~sparsedyn.contact.lazy_modes._Modes`, its iterations an int: what a rollout
    keeps of a step); ``finite``: ``out`` is known finite."""
    rep = out.report
    one = rep.ndim == 1
    r = rep.tolist() if one else None             # one state: its report as Python floats
    # one state: one finite sum says all are finite (Python's floats overflow without a warning: then each is looked at)
    if not (finite or one and math.isfinite(sum(out.v_next.tolist()) + sum(out.q_next.tolist()) + sum(r))):
        _finite(who, out)
    converged = r[4] > 0.5 if one else np.logical_and.reduce(rep[..., 4] > 0.5, None)
    impulses = out.impulses if index is None else out.impulses.take(index, -2)
    if not converged:
        ok = rep[..., 4] > 0.5
        warnings.warn(f"{who}: the {solver} contact solver stopped after {int(rep[..., 3].max())} iterations in "
                      f"{int((~ok).sum())} of {ok.size} state(s) before reaching tol = {tol:g}; worst "
                      f"residuals: primal {rep[..., 0].max():.3g} N s, dual {rep[..., 1].max():.3g} m/s, "
                      f"complementarity {rep[..., 2].max():.3g} J (scales {rep[..., 5].min():.3g} N s, "
                      f"{rep[..., 6].min():.3g} m/s)", ContactStepWarning, stacklevel=_checks.user_stacklevel())
    if one and bare:                              # (a rollout's: no residuals, no ContactStep)
        return out.q_next, out.v_next, impulses, _Modes(out, index, tol), int(r[3])
    if one:                                       # (its modes, residuals and iterations made when read)
        modes = _Modes(out, index, tol)
        return tuple.__new__(LazyModesStep, (out.q_next, out.v_next, impulses, modes, modes, modes))
    res = tuple.__new__(ContactResiduals, (rep[..., 0], rep[..., 1], rep[..., 2]))      # (less a Python frame)
    velocities = out.velocities if index is None else out.velocities.take(index, -2)
    return ContactStep(out.q_next, out.v_next, impulses, _modes(impulses, velocities, rep[..., 5], rep[..., 6], tol),
                       res, rep[..., 3].astype(int))


def _one_step(out, index, solver, tol):
    """:func:`_result` of one state's kernel arrays ``out`` (a :class:`StepArrays` or the plain tuple of
    its entries), known finite (the kernel's fast path), with the least work where the solver converged."""
    if out[4][4] > 0.5:
        modes = _Modes(out, index, tol)
        return tuple.__new__(LazyModesStep, (out[0], out[1], out[2] if index is None else out[2].take(index, -2),
                                             modes, modes, modes))
    return _result("contact_step", solver, tol, tuple.__new__(StepArrays, out), index, finite=True)


def _finite(who, out):
    """``FloatingPointError`` naming the states whose step is not finite (its problem overflows)."""
    every = np.logical_and.reduce                 # (not ndarray.all: its Python wrapper costs as much again)
    if not (every(np.isfinite(out.v_next), None) and every(np.isfinite(out.q_next), None)
            and every(np.isfinite(out.report), None)):
        finite = np.isfinite(out.v_next).all(-1) & np.isfinite(out.q_next).all(-1) & np.isfinite(out.report).all(-1)
        raise FloatingPointError(f"{who}: the step of {int((~finite).sum())} of {finite.size} state(s) is not "
                                 f"finite (the first at batch index {np.argwhere(~finite)[0].tolist()}); its "
                                 f"contact problem overflows")


# --- trajectories --------------------------------------------------------------------------------

@model_method
def rollout(model, q0, v0, tau_or_controller, contacts, dt, steps, **options):
    """Simulate ``steps`` contact steps (:func:`contact_step`) from ``(q0, v0)`` (a :class:`Rollout`).

    ``tau_or_controller``: joint forces (nv,) held constant, a sequence (steps, ..., nv), or a
    callable ``controller(t, q, v) -> tau`` called before each step (``t = k dt``).  A batch of
    initial states (..., nq) runs all environments at once; ``model`` may be ``sd.compile(model)``.  Each step is
    warm-started from the previous impulses; ``options`` go to :func:`contact_step` (``tol``, ``solver``,
    ``f_ext``, ``passive``: the joints' springs and dampers, ``"implicit"``: their dampers at ``v+``, ...).

    With a list of contacts, only their points touch the ground (the rest of the robot passes through
    it); a :class:`~sparsedyn.Scene` finds the contacts from the collision shapes at every step, so
    ``impulses`` and ``modes`` are then lists, one array (nc_k, 3) and (nc_k,) per step (for a batch of
    initial states (B, nq), a sequence of B of them per step), and each step starts from the impulses of
    the contacts that persist from the step before (the same pair of shapes, the point moved by less
    than :data:`~sparsedyn.contact.scene_step.WARM_RADIUS`).  The joints' limits bound nothing here.
    """
    _checks.model_first("rollout", model, "model, q0, v0, tau_or_controller")
    who = "rollout"
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"{who}: steps must be an integer >= 0, got {steps!r}")
    dt = _positive(who, "dt", dt)
    runner = model
    model, _ = _model_and_kernels(model, who)
    scene = contacts if isinstance(contacts, Scene) else None
    if scene is None:
        contacts = _frictional(model, contacts, who)[0]
    controller: Callable = tau_or_controller if callable(tau_or_controller) else None
    if controller is None:
        taus = _checks.numeric("tau_or_controller", tau_or_controller, "joint forces (..., nv) or (steps, ..., nv)")
        if taus.shape[-1:] != (model.nv,):
            raise ValueError(f"{who}: tau_or_controller must be joint forces of shape (nv,) = ({model.nv},), "
                             f"(steps, ..., nv) or a callable controller(t, q, v); got shape {taus.shape}")
        seq = taus.ndim >= 2 and taus.shape[0] == steps and steps > 0
    # (checked here, not only by the first step: a rollout of 0 steps takes none)
    q = _checks.configuration(model, _checks.plain_floats(who, "q0", q0, f"(..., {model.nq})"), f"{who}: q0")
    v = _checks.velocity(model, _checks.plain_floats(who, "v0", v0, f"(..., {model.nv})"), f"{who}: v0")
    tau_at = _checks.controlled(who, controller, dt, model.nv) if controller is not None else \
        (lambda k, q, v: taus[k]) if seq else (lambda k, q, v: taus)
    springs = None
    if passive := passive_flag(who, options.pop("passive", False)):     # (each step's: forces of its state)
        forces, springs = tau_at, vector_springs(model)
        tau_at = lambda k, q, v: with_passive(who, model, q, v, forces(k, q, v))      # noqa: E731
        if passive == IMPLICIT:                   # the dampers at the end velocity: a model of its own
            runner, contacts = implicit_damping(who, model, contacts, dt)
    scene = contacts if scene is not None else None
    warm = options.pop("warm_start", None)
    if scene is not None:
        q, v = batch_states(who, q, v, None if controller is not None else taus.shape[seq:-1])
        bulk = None if controller is not None or passive and springs is None or taus.dtype != np.float64 or not (
            taus.ndim == 1 or seq and taus.ndim == 2) else taus           # (what the native steps take)
        qs, vs, imps, modes, its = _scene_rollout(runner, q, v, tau_at, scene, dt, steps, _options(options, warm),
                                                  bulk, springs)
    else:
        qs, vs, imps, modes, its = [q], [v], [], [], []
        for k in range(steps):
            s = contact_step(runner, q, v, tau_at(k, q, v), contacts, dt, warm_start=warm, **options)
            q, v, warm = s.q, s.v, s.impulses
            qs.append(q), vs.append(v), imps.append(s.impulses), modes.append(s.modes), its.append(s.iterations)
    shape = qs[-1].shape[:-1]
    if vs[-1].shape[:-1] != shape:
        shape = np.broadcast_shapes(shape, vs[-1].shape[:-1])

    def stack(xs, tail):
        if type(xs) is np.ndarray:               # (a scene's chained steps: stacked already)
            return xs
        if not xs:
            return np.zeros((0,) + shape + tail)
        full = shape + tail                       # (np.array of equal shapes: np.stack's checks cost more)
        return np.array(xs) if all(x.shape == full for x in xs) else np.stack([np.broadcast_to(x, full) for x in xs])
    if scene is not None:                         # (its modes computed when read)
        return tuple.__new__(LazyModesRollout, (stack(qs, (model.nq,)), stack(vs, (model.nv,)), imps, modes,
                                                np.array(its, int)))
    return Rollout(stack(qs, (model.nq,)), stack(vs, (model.nv,)), stack(imps, (len(contacts), 3)),
                   np.stack(modes) if modes else np.zeros((0,) + shape + (len(contacts),), "<U5"),
                   np.stack(its) if its else np.zeros((0,) + shape, int))


def _scene_rollout(model, q, v, tau_at, scene, dt, steps, options, taus=None, springs=None):
    """``(qs, vs, impulses, modes, iterations)`` lists of :func:`rollout` in ``scene`` from ``(q, v)``
    (checked) with ``tau_at(k, q, v)`` the joint forces of step ``k`` and :func:`contact_step`'s
    ``options`` (all given): each step warm-started where a contact persists.  ``taus``: where no
    controller runs between the steps (no code of the caller's, which might take steps in the scene),
    the joint forces, (nv,) held or (steps, nv) (row k: step k's); the steps then run one after another in
    one native call as long as the fused road holds them (:func:`~sparsedyn.contact.scene_fused.chained_steps`),
    each adding ``springs`` where given (those ``tau_at`` adds).  One state's modes are computed for all
    steps at once, when first read (:class:`~sparsedyn.contact.lazy_modes._TrajectoryModes`)."""
    qs, vs, imps, modes, its = [q], [v], [], [], []
    previous = general = plan = None
    one = q.ndim == 1
    options["bare"] = one                         # one state: each step as a plain tuple (no residuals)
    fuse = one and model is scene.model and options["f_ext"] is None and options["gravity"] is None
    settings = _step_settings("contact_step", dt, options["tol"], options["max_iterations"], options["solver"],
                              options["margin"]) if fuse else None
    solver, tol, warm = options["solver"], options["tol"], options["warm_start"]
    rows, chained, k = None, 0, 0                 # (the chains' states and reports: rollout_rows)
    while k < steps:
        # one native call where the scene's layout holds the step's contacts (scene_fused), the warm start matched in
        # it; its plan held from step to step while nothing else runs between them (no controller) and every step
        # takes this road (the Python road may grow the layout)
        if fuse and (plan is None or taus is None):
            plan = trajectory_plan(scene, model, dt) if previous is not None or warm is None or \
                type(warm) is np.ndarray else None
        got = need = None
        if plan and taus is not None:             # the steps in one native call
            if general is None or general[0] is not plan:
                general = (plan, general_matching(scene, plan), step_candidates(scene, plan, dt))
            # (while the data slots are more than the least, in chains that end where the count may
            # shrink: their contacts counted between the chains, the count shrunk where they fit in fewer)
            n = scene.cache.get("data_slot_count", 0)
            ask = steps - k if n <= MIN_DATA_SLOTS else min(steps - k, steps_to_shrink(scene))
            rows = rows or rollout_rows(scene.model, steps, q, v)
            runs = chained_steps(plan, q, v, taus[k:] if taus.ndim == 2 else taus, settings,
                                 warm if previous is None else None, previous, ask, general[1],
                                 rows if k == 0 else (rows[0][k:], rows[1][k:], rows[2][k:]), springs, general[2])
            need = runs.pop() if runs and type(runs[-1]) is int else None       # (more contacts than its slots)
            if runs:
                append_chain(runs, rows, k, qs, vs, imps, modes, its, lambda got: _result(
                    "contact_step", solver, tol, tuple.__new__(StepArrays, got[0]), got[1], bare=True, finite=True))
                k, chained = k + len(runs), chained + len(runs)
                got = runs[-1]
                q, v, previous = got[0][0], got[0][1], (FoundContacts(got[2], None, got[3]), got[4])
                if n > MIN_DATA_SLOTS and data_slots_used(scene, [len(r[2]) for r in runs]) != n:
                    plan = None                   # (the next steps: the plan of the new count)
            if k == steps:
                break
            if len(runs) == ask:                  # (no step declined: the next chain)
                continue
            got = None                            # (that step declined: the Python road, or its count's plan)
        elif plan:
            got = chained_step(model, q, v, tau_at(k, q, v), scene, dt, settings, warm if previous is None else None,
                               previous, plan)
            need, got = (got, None) if type(got) is int else (None, got)
        if need is not None:                      # (more contacts than its data slots: their count's plan next)
            data_slot_count(scene, need)
            plan = None
            continue
        if got:
            n = scene.cache.get("data_slot_count", 0)
            if n > MIN_DATA_SLOTS and data_slots_used(scene, (len(got[2].pair),)) != n:
                plan = None                       # (a count of data slots shrunk: its plan asked next)
            s = _chained(got[:2] + (None, None, got[0][2] if got[1] is None else got[0][2].take(got[1], -2)), solver,
                         tol)
            found = got[2]
        else:
            # (one dict of options for all steps: each step sets its warm start in it)
            s, found = step_in_scene(_slotted_step, model, q, v, tau_at(k, q, v), scene, dt, options, previous)
            plan = None
        if type(s) is not tuple:                  # a batch, or the free step of a scene with no slot
            s = (s.q, s.v, s.impulses, tuple.__getitem__(s, 3), s.iterations)
        q, v, impulses, mode, iterations = s      # (one state's mode: its _Modes, not computed yet)
        previous = (found, impulses) if one else batch_previous(found, impulses)
        qs.append(q), vs.append(v), imps.append(impulses), its.append(iterations), modes.append(mode)
        k += 1
    qs, vs = stacked_states(qs, vs, rows, chained, steps)
    return qs, vs, imps, _TrajectoryModes(modes, tol), its


def _chained(got, solver, tol):
    """A rollout's step ``(q, v, impulses, modes, iterations)`` (:func:`_result`'s ``bare`` tuple) of the fused
    road's ``(StepArrays tuple, index, pair, rows, impulses)`` (its arrays finite: the kernel's fast path)."""
    out, index = tuple.__new__(StepArrays, got[0]), got[1]
    r = out[4].tolist()                           # the report (one state's)
    if r[4] > 0.5:                                # converged: as _result makes it (no warning)
        return out[0], out[1], got[4], _Modes(out, index, tol), int(r[3])
    s = _result("contact_step", solver, tol, out, index, bare=True, finite=True)
    return s[0], s[1], got[4], s[3], s[4]
