"""Closed-loop mechanisms shipped with the library (used by the tests and the demo).

Each is an open tree built with :class:`~sparsedyn.model.builders.ModelBuilder` whose
loops are closed by constraints, bundled as a :class:`Mechanism`:

============================  ====  ===  ====  ========================================================
example                       nv    m    dof   loop closure / actuation
============================  ====  ===  ====  ========================================================
``four_bar()``                3     3    1     3D point (rank 2: planar loop, z row redundant); crank
``slider_crank()``            3     2    1     point, x and y rows; crank
``five_bar()``                4     2    2     point, x and y rows; both base joints (fully actuated)
``delta_robot()``             12    9    3     three 3D points (spherical joints); three arm motors
``humanoid_double_support``   35    12   23    two 6D welds (soles on the ground); 29 joints
                                               (over-actuated: 29 > 23)
============================  ====  ===  ====  ========================================================

Planar mechanisms move in the xy plane (revolute joints about z) with gravity
``(0, -9.81, 0)``: y is up.  Lengths in m, masses in kg.

The delta robot's platform hangs from the world by three massless prismatic
joints (x, y, z): this stands for the parallelograms of a real delta, which keep
the platform's orientation fixed; the three legs (motor arm, universal joint
at the elbow, rod) close on the platform through spherical joints (point
constraints).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model.builders import humanoid, humanoid_standing_configuration
from ..algorithms.kinematics import frame_placement
from ..model.builders import ModelBuilder
from ..model import Model
from ..model.spatial import Transform, rotz, xlt
from ..model.joints import make_joint
from .assembly import assemble, newton
from .base import ConstraintSet
from .errors import AssemblyError, PartitionError
from ..algorithms.configuration import integrate
from .frames import PointCoincidence, Weld
from .inverse import actuation_matrix
from .partition import dof_indices, null_space, partition

__all__ = ["Mechanism", "four_bar", "slider_crank", "five_bar", "delta_robot", "humanoid_double_support",
           "EXAMPLES", "example"]

PLANAR_GRAVITY = (0.0, -9.81, 0.0)


@dataclass(frozen=True, eq=False)
class Mechanism:
    """A tree model, its closing constraints and its actuation.

    ``q0``: an assembled configuration.  ``independent``: joints that
    parametrise the mechanism (``len = dof`` coordinates); :meth:`random_state`
    perturbs them by up to ``spread`` (rad or m; free joints by a twist of that
    size) and assembles the others.  ``params``: the geometry, for closed forms.
    """

    name: str
    model: Model
    constraints: ConstraintSet
    actuated: tuple
    independent: tuple
    q0: np.ndarray
    spread: float
    description: str
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        q0 = np.array(self.q0, float)
        q0.setflags(write=False)
        object.__setattr__(self, "q0", q0)

    @property
    def B(self) -> np.ndarray:
        """Actuation matrix (nv, nu) of :attr:`actuated`."""
        return actuation_matrix(self.model, self.actuated)

    @property
    def dof(self) -> int:
        """Degrees of freedom of the closed mechanism (number of independent coordinates)."""
        return len(dof_indices(self.model, self.independent, "independent"))

    def partition(self, q):
        """The partition with :attr:`independent` independent, at ``q``."""
        return partition(self.constraints, q, independent=self.independent)

    def configuration(self, values, steps=10):
        """The assembled configuration with the independent joints at ``values`` (in the order of
        :attr:`independent`; one-coordinate joints only), reached from ``q0`` by ``steps`` steps of
        continuation so that it stays on the assembly branch of ``q0``."""
        idx = []
        for name in self.independent:
            i = self.model.joint(name)
            if self.model.joints[i].nq != 1:
                raise ValueError(f"{self.name}: configuration() needs one-coordinate independent joints; "
                                 f"{name!r} is {self.model.joints[i].type}")
            idx.append(int(self.model.q_start[i]))
        values = np.broadcast_to(np.asarray(values, float), (len(idx),))
        q = self.q0.copy()
        start = q[idx].copy()
        for s in np.linspace(0.0, 1.0, steps + 1)[1:]:
            q[idx] = start + s * (values - start)
            q = assemble(self.constraints, q, independent=list(self.independent))
        return q

    def _random_configuration(self, rng, spread, tries):
        """``(q, G(q), partition)`` at a random assembled configuration."""
        spread = self.spread if spread is None else spread
        ind = dof_indices(self.model, self.independent, "independent")
        last = None
        for _ in range(tries):
            dv = np.zeros(self.model.nv)
            dv[ind] = rng.uniform(-spread, spread, len(ind))
            try:
                q, _, G = newton(self.constraints, integrate(self.model, self.q0, dv), ind)
                return q, G, partition(self.constraints, q, independent=self.independent, G=G)
            except (AssemblyError, PartitionError) as e:
                last = e
        raise AssemblyError(f"{self.name}: no random configuration assembled in {tries} tries ({last})")

    def random_configuration(self, rng, spread=None, tries=50):
        """An assembled configuration: ``q0`` with the independent joints moved at random by up to
        ``spread`` and the others solved by :func:`~.assembly.assemble` (retried if that fails)."""
        return self._random_configuration(np.random.default_rng(rng), spread, tries)[0]

    def random_state(self, rng, spread=None):
        """``(q, v, a)``: a random consistent state (``g = 0``, ``G v = 0``, ``G a + Gdot v = 0``)
        with standard-normal independent velocities and accelerations."""
        rng = np.random.default_rng(rng)
        q, G, part = self._random_configuration(rng, spread, 50)
        ns = null_space(G, part)
        k = len(part.independent)
        v = ns.gamma @ rng.normal(size=k)
        b = self.constraints.bias(q, v)
        a = ns.gamma @ rng.normal(size=k)
        a[part.dependent] -= ns.solve_dependent(b)
        return q, v, a


def _bar(m, L, w=0.02):
    """Rotational inertia about the centre of mass of a slender box of length ``L`` along x."""
    return m / 12.0 * np.diag([2 * w * w, L * L + w * w, L * L + w * w])


def _rod_z(m, L, w=0.01):
    """Same along z."""
    return m / 12.0 * np.diag([L * L + w * w, L * L + w * w, 2 * w * w])


def _assembled(cs, guess, held):
    return assemble(cs, np.asarray(guess, float), independent=held)


# --- planar four-bar ------------------------------------------------------------

def four_bar(ground=0.4, crank=0.1, coupler=0.35, rocker=0.3, crank_angle=1.0) -> Mechanism:
    """Crank-rocker four-bar (Grashof): pivots O = (0, 0) and C = (ground, 0).

    Bodies ``crank`` (joint ``crank_joint`` at O), ``coupler`` (``coupler_joint``
    at the crank tip; its centre of mass is off the line of its joints),
    ``rocker`` (``rocker_joint`` at C).  The loop closes at the coupler tip =
    rocker tip with a 3D point constraint: its z row is identically zero, so
    ``G`` (3 x 3) has rank 2.  Actuated: the crank.  Joint angles are relative
    (the coupler's to the crank).
    """
    p = dict(ground=ground, crank=crank, coupler=coupler, rocker=rocker,
             m=(0.3, 0.8, 0.5), com=((crank / 2, 0.0), (coupler / 2, 0.04), (rocker / 2, 0.0)))
    rev = make_joint("revolute", (0, 0, 1))
    b = ModelBuilder("four_bar", gravity=PLANAR_GRAVITY)
    m1, m2, m3 = p["m"]
    b.add_body("crank", None, rev, mass=m1, com=[crank / 2, 0, 0], rot_inertia=_bar(m1, crank),
               joint_name="crank_joint")
    b.add_body("coupler", "crank", rev, xlt(np.array([crank, 0.0, 0.0])), mass=m2,
               com=[coupler / 2, 0.04, 0], rot_inertia=_bar(m2, coupler), joint_name="coupler_joint")
    b.add_body("rocker", None, rev, xlt(np.array([ground, 0.0, 0.0])), mass=m3, com=[rocker / 2, 0, 0],
               rot_inertia=_bar(m3, rocker), joint_name="rocker_joint")
    b.add_frame("coupler_tip", "coupler", xlt(np.array([coupler, 0.0, 0.0])))
    b.add_frame("rocker_tip", "rocker", xlt(np.array([rocker, 0.0, 0.0])))
    model = b.build()
    cs = ConstraintSet(model, [PointCoincidence(model, "coupler_tip", "rocker_tip", name="loop")])
    q0 = _assembled(cs, [crank_angle, 0.6, 1.8], ["crank_joint"])
    return Mechanism("four_bar", model, cs, ("crank_joint",), ("crank_joint",), q0, np.pi,
                     "planar four-bar, 3D point closure (rank-deficient G), crank actuated", p)


# --- slider-crank ---------------------------------------------------------------

def slider_crank(crank=0.1, rod=0.35, crank_angle=1.0) -> Mechanism:
    """Crank (``crank_joint`` at the origin), connecting rod (``rod_joint`` at the
    crank pin), slider (``slider_joint``, prismatic along x from the world).  The
    rod tip is pinned to the slider: point constraint on the x and y axes.
    Actuated: the crank."""
    p = dict(crank=crank, rod=rod, m=(0.4, 0.6, 0.9), com=((crank / 2, 0.0), (rod * 0.4, 0.0)))
    rev = make_joint("revolute", (0, 0, 1))
    b = ModelBuilder("slider_crank", gravity=PLANAR_GRAVITY)
    m1, m2, m3 = p["m"]
    b.add_body("crank", None, rev, mass=m1, com=[crank / 2, 0, 0], rot_inertia=_bar(m1, crank),
               joint_name="crank_joint")
    b.add_body("rod", "crank", rev, xlt(np.array([crank, 0.0, 0.0])), mass=m2, com=[0.4 * rod, 0, 0],
               rot_inertia=_bar(m2, rod), joint_name="rod_joint")
    b.add_body("slider", None, make_joint("prismatic", (1, 0, 0)), mass=m3, com=[0, 0, 0],
               rot_inertia=np.diag([1e-3, 1e-3, 1e-3]), joint_name="slider_joint")
    b.add_frame("rod_tip", "rod", xlt(np.array([rod, 0.0, 0.0])))
    model = b.build()
    cs = ConstraintSet(model, [PointCoincidence(model, "rod_tip", "slider", axes="xy", name="pin")])
    q0 = _assembled(cs, [crank_angle, -crank_angle - 0.2, crank + rod], ["crank_joint"])
    return Mechanism("slider_crank", model, cs, ("crank_joint",), ("crank_joint",), q0, np.pi,
                     "slider-crank, planar point closure, crank actuated", p)


# --- planar five-bar --------------------------------------------------------------

def five_bar(base=0.2, proximal=0.25, distal=0.35) -> Mechanism:
    """Planar five-bar: base joints ``left_joint`` at (0, 0) and ``right_joint`` at
    (base, 0), both actuated; distal links ``left_distal``/``right_distal`` meet
    at their tips (point constraint, x and y).  Two dofs, fully actuated."""
    p = dict(base=base, proximal=proximal, distal=distal)
    rev = make_joint("revolute", (0, 0, 1))
    b = ModelBuilder("five_bar", gravity=PLANAR_GRAVITY)
    for side, x0, mp, md in (("left", 0.0, 0.5, 0.4), ("right", base, 0.6, 0.3)):
        b.add_body(f"{side}_proximal", None, rev, xlt(np.array([x0, 0.0, 0.0])) if x0 else None, mass=mp,
                   com=[proximal / 2, 0, 0], rot_inertia=_bar(mp, proximal), joint_name=f"{side}_joint")
        b.add_body(f"{side}_distal", f"{side}_proximal", rev, xlt(np.array([proximal, 0.0, 0.0])), mass=md,
                   com=[distal / 2, 0, 0], rot_inertia=_bar(md, distal), joint_name=f"{side}_distal_joint")
        b.add_frame(f"{side}_tip", f"{side}_distal", xlt(np.array([distal, 0.0, 0.0])))
    model = b.build()
    cs = ConstraintSet(model, [PointCoincidence(model, "left_tip", "right_tip", axes="xy", name="tip")])
    act = ("left_joint", "right_joint")
    q0 = _assembled(cs, [2.0, -1.3, 1.1, 1.3], act)
    return Mechanism("five_bar", model, cs, act, act, q0, 0.3,
                     "planar five-bar, two actuated base joints (fully actuated)", p)


# --- delta robot -----------------------------------------------------------------

def delta_robot(base_radius=0.15, platform_radius=0.05, arm=0.2, rod=0.5, arm_angle=0.5) -> Mechanism:
    """Delta robot: three legs at 0, 120 and 240 degrees about z.

    Leg ``k``: motor ``arm{k}_joint`` (revolute about the tangent of the base
    circle; positive turns the arm down), elbow universal joint
    (``elbow{k}_joint`` parallel to the motor axis, then ``rod{k}_joint``
    perpendicular to it), rod of length ``rod`` hanging along its -z axis.  The
    platform moves in translation (joints ``platform_x/y/z``, see the module
    docstring); rod tip ``k`` is held on platform point ``k`` by a spherical joint
    (3D point constraint ``closure{k}``).  Actuated: the three motors.
    """
    p = dict(base_radius=base_radius, platform_radius=platform_radius, arm=arm, rod=rod)
    b = ModelBuilder("delta_robot")
    py = make_joint("revolute", (0, 1, 0))
    px = make_joint("revolute", (1, 0, 0))
    b.add_body("platform_x", None, make_joint("prismatic", (1, 0, 0)), joint_name="platform_x")
    b.add_body("platform_y", "platform_x", make_joint("prismatic", (0, 1, 0)), joint_name="platform_y")
    b.add_body("platform", "platform_y", make_joint("prismatic", (0, 0, 1)), mass=0.3, com=[0, 0, 0],
               rot_inertia=np.diag([2e-4, 2e-4, 4e-4]), joint_name="platform_z")
    closures = []
    for k in range(3):
        phi = 2 * np.pi * k / 3
        c, s = np.cos(phi), np.sin(phi)
        n = k + 1
        # Leg frame: turned by phi about z, x radial outward, y tangent (the motor axis).
        b.add_body(f"arm{n}", None, py, Transform(rotz(phi), base_radius * np.array([c, s, 0.0])), mass=0.4,
                   com=[arm / 2, 0, 0], rot_inertia=_bar(0.4, arm), joint_name=f"arm{n}_joint")
        b.add_body(f"elbow{n}", f"arm{n}", py, xlt(np.array([arm, 0.0, 0.0])), mass=0.02, com=[0, 0, 0],
                   rot_inertia=np.eye(3) * 2e-6, joint_name=f"elbow{n}_joint")
        b.add_body(f"rod{n}", f"elbow{n}", px, mass=0.1, com=[0, 0, -rod / 2], rot_inertia=_rod_z(0.1, rod),
                   joint_name=f"rod{n}_joint")
        b.add_frame(f"rod{n}_tip", f"rod{n}", xlt(np.array([0.0, 0.0, -rod])))
        b.add_frame(f"platform{n}", "platform", xlt(platform_radius * np.array([c, s, 0.0])))
        closures.append((f"rod{n}_tip", f"platform{n}", f"closure{n}"))
    model = b.build()
    cs = ConstraintSet(model, [PointCoincidence(model, a, pl, name=nm) for a, pl, nm in closures])
    act = ("arm1_joint", "arm2_joint", "arm3_joint")
    # Guess: arms at arm_angle, rods tilted inwards, platform below the centre.
    reach = base_radius + arm * np.cos(arm_angle) - platform_radius
    tilt = np.arcsin(min(0.9, reach / rod))
    z = -(arm * np.sin(arm_angle) + rod * np.cos(tilt))
    guess = model.neutral()
    guess[model.q_slice(model.joint("platform_z"))] = z
    for n in (1, 2, 3):
        guess[model.q_slice(model.joint(f"arm{n}_joint"))] = arm_angle
        guess[model.q_slice(model.joint(f"elbow{n}_joint"))] = tilt - arm_angle
    q0 = _assembled(cs, guess, act)
    return Mechanism("delta_robot", model, cs, act, act, q0, 0.25,
                     "delta robot: three R-U-S legs closed on a translating platform, three motors", p)


# --- humanoid, both feet welded --------------------------------------------------------

_LEGS = ("hip_yaw", "hip_roll", "hip_pitch", "knee", "ankle_pitch", "ankle_roll")


def humanoid_double_support(crouch=0.35) -> Mechanism:
    """The built-in humanoid with both soles welded to the ground (6D welds ``l_foot``, ``r_foot``).

    ``q0``: knees bent by ``2 crouch`` (hips and ankles by ``-crouch``), soles flat
    on z = 0.  Actuated: every joint but the floating base (29 > 23 dofs:
    over-actuated, so the efforts are the minimum-norm ones).  Random states move
    the base (a twist of up to ``spread``) and the upper body, and assemble the legs.
    """
    model = humanoid()
    q0 = humanoid_standing_configuration()
    for s in ("l_", "r_"):
        for j, a in (("hip_pitch", -crouch), ("knee", 2 * crouch), ("ankle_pitch", -crouch)):
            q0[model.q_slice(model.joint(s + j))] = a
    q0[2] -= frame_placement(model, q0, "l_sole")[1][2]
    welds = [Weld(model, s + "sole", None, placement=frame_placement(model, q0, s + "sole"), name=s + "foot")
             for s in ("l_", "r_")]
    cs = ConstraintSet(model, welds)
    legs = {s + j for s in ("l_", "r_") for j in _LEGS}
    actuated = tuple(n for n in model.joint_names[1:])
    independent = tuple(n for n in model.joint_names if n not in legs)
    return Mechanism("humanoid_double_support", model, cs, actuated, independent, q0, 0.05,
                     "built-in humanoid, both soles welded to the ground, 29 joints actuated (over-actuated)",
                     dict(crouch=crouch))


#: The examples by name; each value builds a fresh Mechanism when called.
EXAMPLES = {
    "four_bar": four_bar,
    "slider_crank": slider_crank,
    "five_bar": five_bar,
    "delta_robot": delta_robot,
    "humanoid_double_support": humanoid_double_support,
}


def example(name: str) -> Mechanism:
    """The example mechanism called ``name`` (see :data:`EXAMPLES`)."""
    if name not in EXAMPLES:
        raise KeyError(f"no example mechanism {name!r}; available: {', '.join(EXAMPLES)}")
    return EXAMPLES[name]()
