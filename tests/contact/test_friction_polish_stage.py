"""The contact solver's polish stage (:func:`sparsedyn.contact.friction_polish.polish_stage`) as the step
kernel's loop runs it: the rounds of polishes (how long a round goes on, when it merges near duplicates,
one Newton step a run on many rows, its guesses), and the steps a polish finishes (a box or go1's trunk
landing flat, slow slips beside sticking contacts, answers near the tolerance, stalled rounds)."""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from conftest import dm_control_humanoid, rounding_bound
from sparsedyn.contact import friction_polish as fp
from sparsedyn.contact.friction_problem import ADMM_BUDGET
from test_friction import DT, G, H, MASS, MODEL, MU, Q0, TOL, Z, corners


def polish_run(stages, inputs, K, S):
    """``(S, flag)``: a run of the polish stage as the kernel's loop takes it on the loop state ``S``: a
    round's first step from ADMM's iterate (no try yet, ADMM's iterations run) stage 10, the start's round's
    first (no iteration yet) stage 9, a later step stage 3 (where it hands the step to the guesses on pairs,
    the state unchanged, stage 11); the flag relative to stage 3 (as it moves there)."""
    lay = stages[0].args[0]
    k = (9 if S[lay.S["it"]][0] == 0.0 else 10) if S[lay.S["tries"]][0] == 0.0 else 3
    out, flag = stages[k](*inputs, K, S)
    if k == 3 and float(flag) == 8.0:
        assert np.array_equal(out, S)
        k, (out, flag) = 11, stages[11](*inputs, K, S)
    return out, float(flag) + (k - 3)


def box_polish_stage(v=Z):
    """The step kernel's pieces on the box's four corners (moving at ``v``) at a tolerance no polish meets
    (1e-300: every polish rejected): ``(inputs, stages, lay, K, S0)``, the polish stages (:func:`polish_run`),
    ``S0`` the loop state after stage 8 (``G``, which the first sends a start that is not solved to)."""
    from sparsedyn.contact.friction_kernel import _pieces
    from sparsedyn.contact.friction_problem import contact_slots
    slots = contact_slots(MODEL, corners())
    settings = np.array([DT, 1e-300, 300.0, 1e4, 0.005])
    inputs = [Q0, v, Z, settings, np.zeros((4, 3)), slots.data]
    init, stages, _ = _pieces(MODEL, tuple(slots.frames), ())
    lay = stages[0].args[0]
    K, S0 = init(*inputs)
    assert float(stages[0](*inputs, K, S0)[1]) == 8.0
    S0, flag = stages[8](*inputs, K, S0)
    assert float(flag) in (1 - 8.0, 9 - 8.0)                     # factorize or the start's polish
    assert S0[lay.S["G"]].any()
    return inputs, stages, lay, K, S0


def test_a_round_of_polishes_goes_on_while_each_gains_progress():
    """The polish stage's rule for a round (:data:`~sparsedyn.contact.friction_polish.REPEATS`,
    :data:`~sparsedyn.contact.friction_polish.LONGEST`, :data:`~sparsedyn.contact.friction_polish.PROGRESS`),
    on the box's four corners at a tolerance no polish meets (1e-300: every polish rejected): past
    ``REPEATS`` polishes the round polishes again (flag 0) only where the polish's scaled residual is
    below ``PROGRESS`` of the round's best so far, and never past ``LONGEST``; else back to ADMM (-1).
    The round's best is the smallest scaled residual of its polishes."""
    inputs, stages, lay, K, S0 = box_polish_stage()

    def run(tries, pbest):
        S = S0.copy()
        S[lay.S["it"]], S[lay.S["tries"]], S[lay.S["pbest"]] = 100.0, tries, pbest     # (ADMM's iterations pay)
        return polish_run(stages, inputs, K, S)

    out, flag = run(0.0, 0.0)                                     # a fresh round: its best is this polish's
    r = out[lay.S["pbest"]][0]
    assert flag == 0.0 and r > 0.0 and out[lay.S["tries"]][0] == 1.0
    _, flag = run(fp.REPEATS - 2.0, 0.0)                          # within REPEATS: on, whatever the gain
    assert flag == 0.0
    _, flag = run(fp.REPEATS - 1.0, r / fp.PROGRESS * 0.99)       # past REPEATS, short of the gain: done
    assert flag == -1.0
    out, flag = run(fp.REPEATS - 1.0, r / fp.PROGRESS * 1.01)     # past REPEATS, a gain: on
    assert flag == 0.0 and out[lay.S["pbest"]][0] == r
    _, flag = run(fp.LONGEST - 1.0, 1e300)                        # the longest round ends, gain or not
    assert flag == -1.0


def test_a_round_past_its_budget_goes_on_only_while_it_converges():
    """Past the budget of ADMM's iterations (:data:`~sparsedyn.contact.friction_polish.FREE`: here the
    polishes charged, 100 of ``COST m`` iterations each, far exceed the 5 iterations run) a round polishes
    again (flag 0) only where the step's scaled residual is below ``CONVERGING`` of the round's best, else
    back to ADMM (-1); within the budget (1000 iterations run) it goes on whatever the gain, within
    ``REPEATS``.  The box's four corners at a tolerance no polish meets (every polish rejected)."""
    inputs, stages, lay, K, S0 = box_polish_stage()

    def run(it, polishes, pbest):                                  # a round's second step
        S = S0.copy()
        S[lay.S["it"]], S[lay.S["polishes"]], S[lay.S["tries"]], S[lay.S["pbest"]] = it, polishes, 1.0, pbest
        return polish_run(stages, inputs, K, S)

    out, _ = run(5.0, 100.0, 1e3)                                 # its residual (the best: min(1e3, r))
    r = out[lay.S["pbest"]][0]
    assert 0.0 < r < 1e3
    assert fp.COST * lay.m * 100.0 > 5.0 + fp.FREE and fp.PROGRESS < fp.CONVERGING < 1.0
    assert run(5.0, 100.0, r / fp.CONVERGING * 1.01)[1] == 0.0    # unpaid, converging: on
    assert run(5.0, 100.0, r / fp.CONVERGING * 0.99)[1] == -1.0   # unpaid, short of it: back to ADMM
    assert run(1000.0, 100.0, r / fp.CONVERGING * 0.99)[1] == 0.0  # paid: on, gain or not (within REPEATS)


def five_point_stage():
    """:func:`box_polish_stage` on the box's four corners and a fifth point 1 mm from the first (a
    near-duplicate)."""
    return points_stage(corners() + [sd.Contact("box", "3d", friction=MU, point=(-H + 1e-3, -H, -H))])


def grid(n=4):
    """``n x n`` contacts on the box's bottom face, its corners among them."""
    return [sd.Contact("box", "3d", friction=MU, point=(x, y, -H), name=f"p{i}")
            for i, (x, y) in enumerate((x, y) for x in np.linspace(-H, H, n) for y in np.linspace(-H, H, n))]


def points_stage(contacts):
    """:func:`box_polish_stage` on the box's ``contacts``."""
    from sparsedyn.contact.friction_kernel import _pieces
    from sparsedyn.contact.friction_problem import contact_slots
    slots = contact_slots(MODEL, contacts)
    settings = np.array([DT, 1e-300, 300.0, 1e4, 0.005])
    inputs = [Q0, Z, Z, settings, np.zeros((len(slots.frames), 3)), slots.data]
    init, stages, _ = _pieces(MODEL, tuple(slots.frames), ())
    lay = stages[0].args[0]
    K, S0 = init(*inputs)
    return inputs, stages, lay, K, stages[8](*inputs, K, S0)[0]             # G: stage 8


def test_every_other_round_merges_near_duplicates_and_a_warm_start_never():
    """:func:`~sparsedyn.contact.friction_polish.merges`: 1 on rounds 0, 2, ..., 8 of ADMM's iterates, 0 on
    the odd ones and on a warm start's round.  On the box's four corners and a fifth point 1 mm from the
    first (a near-duplicate), from an iterate sharing that corner's load 0.6 : 0.4 (a tolerance no polish
    meets, 1e-300): a merged round's answer puts it on the corner, the fifth point open (0 exactly) and each
    corner ``m g dt / 4`` (the least-norm answer of four corners); a round between, and a warm start's,
    keep both closed, the fifth carrying a share, the five loads summing to ``m g dt``."""
    assert [float(fp.merges(float(r), 0.0)) for r in range(fp.ROUNDS + 1)] == [1.0, 0.0] * (fp.ROUNDS // 2) + [1.0]
    assert float(fp.merges(0.0, 1.0)) == 0.0 and float(fp.merges(2.0, 1.0)) == 0.0
    inputs, stages, lay, K, S0 = five_point_stage()
    load = MASS * G * DT
    z = np.zeros((lay.nc, 3))
    z[:4, 2], z[0, 2], z[4, 2] = load / 4, 0.6 * load / 4, 0.4 * load / 4

    def answer(it, rounds):
        S = S0.copy()
        S[lay.S["it"]], S[lay.S["rounds"]], S[lay.S["z"]] = it, rounds, z.reshape(-1)
        return polish_run(stages, inputs, K, S)[0][lay.S["pz"]].reshape(lay.nc, 3)
    tol = rounding_bound(lay.m, 1.0 / fp.EPS) * 10 * load
    for rounds in (0.0, 2.0):
        lam = answer(100.0, rounds)
        assert lam[4, 2] == 0.0 and np.abs(lam[:4, 2] - load / 4).max() <= tol
    for it, rounds in ((100.0, 1.0), (0.0, 0.0)):
        lam = answer(it, rounds)
        assert lam[4, 2] > 0.1 * load / 4 and abs(lam[:5, 2].sum() - load) <= tol


def test_a_polish_of_many_rows_runs_one_newton_step_a_stage_run():
    """Past 64 rows a polish is two Newton steps (:func:`~sparsedyn.contact.friction_polish.newton_steps`),
    one a run of the polish stage (its compiled program holds one step): on a box resting on 24 points
    of its face (padded to 32 slots, 96 rows; a tolerance no answer meets, 1e-300: every step is rejected), the
    round's first run asks for the second step (flag 0) and counts half a polish, and the two runs'
    answer is that of ``polished`` taking both steps at once, bit for bit (the same operations: the
    second step starts from the first's answer on the cones, its directions from it)."""
    from sparsedyn.contact.friction_kernel import _pieces
    from sparsedyn.contact.friction_problem import contact_slots
    grid = [(x, y) for x in np.linspace(-H, H, 5) for y in np.linspace(-H, H, 5)][:24]
    contacts = [sd.Contact("box", "3d", friction=MU, point=(x, y, -H), name=f"p{i}") for i, (x, y) in enumerate(grid)]
    slots = contact_slots(MODEL, contacts)
    settings = np.array([DT, 1e-300, 300.0, 1e4, 0.005])
    nc = len(slots.frames)
    inputs = [Q0, Z, Z, settings, np.zeros((nc, 3)), slots.data]
    init, stages, _ = _pieces(MODEL, tuple(slots.frames), ())
    lay = stages[0].args[0]
    assert lay.m == 3 * nc == 96 and fp.newton_steps(lay.m) == 2
    K, S = init(*inputs)
    S = stages[8](*inputs, K, S)[0]                               # G and its scales: stage 8
    S[lay.S["it"]] = 100.0                                        # (ADMM's iterations pay for the steps)
    S[lay.S["z"]] = np.tile([0.0, 0.0, 0.1], nc)                  # an iterate: all sticking
    first, flag = polish_run(stages, inputs, K, S)
    assert flag == 0.0 and first[lay.S["polishes"]][0] == 0.5 and first[lay.S["tries"]][0] == 1.0
    second, _ = polish_run(stages, inputs, K, first)
    _, mu, Kd, Sd = lay.unpack(tuple(inputs) + (K, S))
    G = Sd["G"].reshape(96, 96)
    lam = fp.polished(G, Kd["g"], mu, S[lay.S["z"]], Sd["lmax"][0], fp.active_contacts(G, lay.normal), Kd["gmax"][0],
                      Kd["dmax"][0], 1e-300, slots=lay.slots(Kd), Z=Kd["Z"].reshape(96, lay.nv))[0]
    assert np.abs(lam).max() > 0.0
    assert np.array_equal(second[lay.S["pz"]], lam) and second[lay.S["polishes"]][0] == 1.0


def _landing_box(rotvec, spin, slide, fall):
    """The box tilted by ``rotvec`` with its lowest corner ``5e-8`` m above the floor (within
    ``TOUCHING_GAP``: no speculative term) and the others millimetres above (``gap / dt``), spinning at
    ``spin`` rad/s about the vertical, moving at ``slide`` m/s along x and ``fall`` m/s down: ``(q, v)``."""
    from scipy.spatial.transform import Rotation
    rot = Rotation.from_rotvec(rotvec)
    low = rot.apply([(x, y, -H) for x, y in [(-H, -H), (H, -H), (-H, H), (H, H)]])[:, 2].min()
    q = np.concatenate([[0.0, 0.0, 5e-8 - low], rot.as_quat()])
    w, lin = rot.inv().apply([0.0, 0.0, spin]), rot.inv().apply([slide, 0.0, -fall])
    return q, np.concatenate([w, lin])


@pytest.mark.parametrize("rotvec, spin, slide, fall, mu", [((0.004, 0.002, 0.0), 5.0, 0.5, 1.0, 0.4),
                                                           ((0.003, 0.001, 0.0), 20.0, 1.0, 1.0, 0.8)])
def test_a_face_landing_flat_with_one_corner_touching_is_polished(rotvec, spin, slide, fall, mu):
    """A box landing flat within one step, its lowest corner within ``TOUCHING_GAP`` of the floor (no
    speculative ``gap / dt``) and the three others speculative: the targets of the four corners' normal
    rows are no rigid motion's (off by about ``5e-8 / dt``), so the mode system with all four closed has
    no solution, and its answer runs off along the corners' null space, negative at a diagonal pair.  The
    polish steps to the first corner that opens (:func:`~sparsedyn.contact.polish_guess.ratio_test`)
    and the solve ends within a few rounds of polishes (before: 299 and 763 iterations), at Coulomb's law
    to the step's tolerance (no :class:`~sparsedyn.ContactStepWarning`)."""
    q, v = _landing_box(rotvec, spin, slide, fall)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.ContactStepWarning)
        s = sd.contact_step(MODEL, q, v, Z, corners(mu=mu), DT)
    assert s.iterations <= 2 * fp.FIRST + 2 * fp.REPEATS + 6, s.iterations
    assert "open" in list(s.modes)


#: go1 (example-robot-data) at step 196 of a drop from 0.45 m onto a plane at zero torque, dt = 2 ms: the
#: trunk landing flat (its box's four bottom corners, one 3.3e-8 m above the plane, the others up to 1 mm),
#: two hips and four feet, the trunk turning at 11 rad/s.
GO1_Q = [-0.004592774428440804, -0.001957570132553897, 0.05801895114075593, -0.001086155845461833,
         0.0024414396063214524, -0.001779652144351385, 0.9999948462249053, -0.08446841333375145, -1.87396247465852,
         2.989248774848623, 0.07257190633928068, -1.8677073443236085, 2.981843184901279, 0.008027334607311334,
         -1.8307324973234393, 2.944475218145738, -0.014200667917511546, -1.8269811136444531, 2.9392572988215075]
GO1_V = [8.733605364902651, -6.847389327701289, -1.0492803347868578, -0.4590602205579575, -0.32916951472451744,
         -1.6849683620742522, -34.886689490281185, -1.8282741589684608, 10.04431117370267, 7.904422425399593,
         -2.28289605037374, 10.350425022807956, -9.270318901947777, -4.906751373852403, 12.660330987896307,
         -15.63325944172697, -6.316237146251073, 13.64981445173422]


def test_go1s_trunk_landing_flat_is_solved_by_the_polish():
    """go1 dropped onto the floor (:data:`GO1_Q`, :data:`GO1_V`): the trunk's four corners are the
    redundant set with no rigid motion's targets of
    :func:`test_a_face_landing_flat_with_one_corner_touching_is_polished` beside six other contacts.  Before,
    ADMM crept for its whole budget and Gauss-Seidel for 10000 sweeps (11014 iterations, a
    :class:`~sparsedyn.ContactStepWarning`): now the solve reaches the tolerance within a few hundred
    iterations, and no open contact carries the ``1e-300`` crumbs of Gauss-Seidel's friction disc."""
    from erd import robots_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.UrdfWarning)      # (go1's trunk inertia: not a rigid body's)
        model = sd.load_urdf(robots_dir() / "go1_description/urdf/go1.urdf", floating_base=True, geometry=True)
    scene = sd.Scene(model, world=[sd.Shape("plane")], self_collision=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.ContactStepWarning)
        s = sd.contact_step(model, np.array(GO1_Q), np.array(GO1_V), np.zeros(model.nv), scene, 2e-3)
    assert s.iterations <= 300, s.iterations
    lam = np.abs(np.asarray(s.impulses))
    assert np.all((lam == 0.0) | (lam > 1e-200))


#: dm_control's humanoid lying on its floor (settled by MuJoCo, then 19 steps of ours with implicit dampers):
#: seven contacts, two soles' mirror-image points slipping at 2e-5 m/s beside sticking ones on the same feet.
HUMANOID_Q = [0.8164811215700902, -7.112897559627488e-07, 0.2702143901896492, -2.151200601565711e-07,
              0.9870403992516759, 1.2996455866609553e-06, 0.1604719609257563, 7.810899768792868e-07,
              -1.3948674584140668, -2.66328007784569e-07, 0.005396069379943438, 0.0018593787110033932,
              -0.252011339596599, 0.03862441995240524, -0.996656308046955, -0.0028264685280086355,
              0.005395520778587312, 0.0018550881443661514, -0.2520119383105827, 0.03862445243907712,
              -0.9966554876895068, 0.0028161599177618816, -0.07727777198902575, 0.6669018409283298,
              -1.5337415908129743, 0.07728189758862496, -0.6669026090085085, -1.5337431790370641]
HUMANOID_V = [-5.210864444466982e-06, -0.3460723459672275, 7.82206234088548e-06, 0.09529603686695942,
              -1.660470406603248e-06, -0.009980508389218792, 1.8183469961394784e-05, -0.9765786156508254,
              -1.4100086247548309e-05, -0.008811276023784509, 0.030472601406977197, 1.2676939050826417,
              -0.752497233470311, -2.2848833963938104, -0.039055352862942164, -0.008766855806067592,
              0.030423102238522147, 1.2676951879175646, -0.7524964111767927, -2.284868452639776,
              0.03898174559376149, 0.3880098778054681, -0.7485653167944313, 1.048409724310452,
              -0.3880185511882265, 0.748532121866963, 1.0483697845906301]


def test_a_slow_slip_beside_sticking_contacts_is_polished():
    """dm_control's humanoid (:data:`HUMANOID_Q`, :data:`HUMANOID_V`, its file's floor and 5 ms, implicit
    dampers): the polish's second Newton step turns two slipping soles' friction by 3 degrees; pulled back
    onto its circle, that friction moved the sticking contacts' velocities by 1e-4 m/s, five times the
    slip, and each later step from there diverged (ADMM and Gauss-Seidel then crept for 2,020 iterations
    to a :class:`~sparsedyn.ContactStepWarning`).  From the system's own answer (``polish``'s next
    iterate) the turns shrink as Newton's steps do: the solve ends in its first round of polishes, at
    Coulomb's law to the step's tolerance."""
    model = dm_control_humanoid()
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", sd.ContactStepWarning)
        s = sd.contact_step(model, HUMANOID_Q, HUMANOID_V, np.zeros(model.nv), sd.Scene(model), 0.005,
                            passive="implicit")
    assert s.iterations <= 20, s.iterations
    assert sorted(s.modes).count("slide") == 2


#: The same humanoid three steps later, and the impulses of the step before (its warm start).
HUMANOID_LATER = ([0.8148792529835944, -7.336923616942484e-07, 0.26985406255395517, -1.4961293126348775e-07,
                   0.9865600274956577, 1.3437351904167956e-06, 0.16339924157088048, 8.860280338890282e-07,
                   -1.409494755799062, -3.521434770207855e-07, 0.005260265796453377, 0.002407872360685652,
                   -0.2335137798752608, 0.02481196248686926, -1.0343092280640942, -0.0035152428932033945,
                   0.00526001661572155, 0.0024034053491549788, -0.23351436050661675, 0.02481198981623303,
                   -1.0343081866799493, 0.0035044461475010886, -0.07066279142887759, 0.6542720796374167,
                   -1.5162051902604368, 0.0706667278063878, -0.6542733977945271, -1.5162074214771144],
                  [-4.136626287001528e-06, -0.4204406887985776, 9.542611988710505e-06, 0.11570263354085515,
                   -1.4191460802999434e-06, -0.012367668693206692, 2.97791775966827e-06, -0.9733263462424191,
                   -2.8662540428800515e-06, -0.008168049146776516, 0.037109807105857075, 1.2156859093818166,
                   -1.0024633239482124, -2.620488174640271, -0.04693361286295134, -0.008155900966091523,
                   0.03710897499840689, 1.2156870912338003, -1.0024641045917866, -2.620473659783271,
                   0.046912845327569376, 0.4675839500291144, -0.8883046417699778, 1.2281063507433816,
                   -0.46759808756175814, 0.8882666889477373, 1.228062564065955],
                  [[-0.5033112470806532, -1.8273018095411528e-06, 0.9895585899485634],
                   [0.1220474005859063, 0.011467314348636851, 0.15623451177923953],
                   [-0.08329564475561971, 0.0004978716829478914, 0.08329713267254207],
                   [0.12205078298335753, -0.011464369007679857, 0.15622991024099023],
                   [-0.08329991739932045, -0.0004988298280441484, 0.0833014109720295],
                   [0.09716112158436592, 0.014360698398275591, 0.11037998353624352],
                   [0.09716051786321209, -0.014360932415232919, 0.11037981524231094]])


def test_an_answer_near_the_tolerance_is_finished_past_the_budget():
    """The humanoid of :func:`test_a_slow_slip_beside_sticking_contacts_is_polished` three steps later
    (:data:`HUMANOID_LATER`), warm-started from the step before: the warm start's round spends the
    polishes' budget; the next round's first step, from ADMM's fifth iteration, leaves Coulomb's residuals
    at 7 times the tolerance, its modes right.  It is finished there (Newton's next step: to rounding,
    :data:`~sparsedyn.contact.friction_polish.NEAR`) where the budget ended the round and ADMM ran 25
    iterations more to the next (36 in all)."""
    model = dm_control_humanoid()
    q, v, warm = HUMANOID_LATER
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", sd.ContactStepWarning)
        s = sd.contact_step(model, q, v, np.zeros(model.nv), sd.Scene(model), 0.005, passive="implicit",
                            warm_start=warm)
    assert s.iterations <= 15, s.iterations


#: dm_control's humanoid lying on its file's floor (``benchmarks/bench_scene.py``'s limp 400-step rollout, step
#: 103) and the impulses of the step before (its warm start).
HUMANOID_STALLED = ([0.5862640354094318, -0.00015231477550519337, 0.23905896753656483, -0.000734752621073798,
                     0.75874251688726, -0.0012872230445392845, 0.6513889746249981, -0.004112923668774627,
                     -2.41980153219012, 0.009179911767847201, -0.007257711680933441, -0.009368216218262762,
                     2.239065174644726, -0.2138241147448968, -1.8974493692701149, -0.0006703309000810888,
                     -0.00018617230204308604, 0.0004771830518774442, 2.239056938857112, -0.2150236656700814,
                     -1.9056569484934625, -0.0005608236316226596, 0.5427815855958883, -0.6727646469587389,
                     -0.43981558357832806, -0.5384648718488418, 0.6789603888249802, -0.4355709589748897],
                    [1.4720636013064448e-05, -0.06426324214402757, -0.0929215823113044, 0.004530279342022635,
                     -0.0014889437894194725, -0.024279151474599654, 0.0955507206450738, -0.03357484837273795,
                     -0.0013529333243698788, -0.00024567119730583675, 0.0007274598437720274, 0.08643789550688515,
                     -0.02245244524118343, -0.06514969942884974, 0.00019350245084985898, -0.0006714740967888801,
                     -8.97510651472048e-05, 0.08595817353099489, -0.022641453877671712, -0.06382636723012111,
                     1.1677663245945202e-05, 0.05324067335662105, 0.0006420568033867757, 0.04391307326863633,
                     0.0294275487922475, 0.16061125490734715, 0.1286267689776049],
                    [[0.0, 0.0, 0.0],
                     [-0.2177024904224212, -0.0013196584842611885, 0.21770649010683968],
                     [-0.05326002849835547, 0.027811420035988778, 0.7844891838723189],
                     [0.2568932032081707, 0.00012901286071713146, 0.2568932356035727],
                     [0.042067651649646175, -0.0028624652507975535, 0.047756627018439864],
                     [0.024594596670898975, -0.0016318393027636023, 0.05756648811743131],
                     [0.2567850034640676, 0.0011827236543484985, 0.2567877271975508],
                     [0.04170102029522046, -0.002392889848387331, 0.05034486186591617],
                     [0.02424607329936228, 0.005039503600044579, 0.05492792033278041],
                     [0.010228559773138097, 0.019634840618045487, 0.0875822665891386],
                     [0.03127845864094552, 0.02798954125435114, 0.07761295094205976]])


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_a_round_that_stalls_restarts_from_its_best_steps_unprojected_answer(backend):
    """dm_control's humanoid lying on its floor (:data:`HUMANOID_STALLED`), warm-started from the step before:
    11 contacts closed on 27 joints, one of them sliding at 1e-8 m/s with its friction on its cone's edge.  The
    first polish of an ADMM round reads the answer's modes, but the projection of its answer onto the cones
    moves every closed contact's velocity, and the next steps, each from the last projected answer, stalled at
    a scaled residual of 0.015 (1,518 iterations, then a :class:`~sparsedyn.ContactStepWarning`).  After a
    step that gains nothing the next starts from the best step's answer as the mode system gave it (a sticking
    contact outside its cone then reads sliding with the friction the system gave it): Newton's steps converge,
    and the step ends within ADMM's budget at Coulomb's law to its tolerance."""
    model = dm_control_humanoid()
    q, v, warm = HUMANOID_STALLED
    with sd.use_backend(backend, **({"deterministic": True} if backend == "native" else {})), \
            warnings.catch_warnings():
        warnings.simplefilter("error", sd.ContactStepWarning)
        s = sd.contact_step(model, q, v, np.zeros(model.nv), sd.Scene(model), 0.005, warm_start=warm)
    assert s.iterations < ADMM_BUDGET, s.iterations


def test_a_rounds_first_step_holds_no_guess_its_weights_discard():
    """The polish stage traced four times (:data:`~sparsedyn.contact.friction_polish._STARTS`): a round's
    later steps (stage 11: the swap, the pairs' merge, the sticking and closing guesses; stage 3: the
    guesses on single contacts and the test whether one on pairs applies), the first step
    from ADMM's iterate (stage 10: the merge of near-duplicates alone) and the start's round's first step
    (stage 9: the closing guess alone) on a box resting on 16 points (48 rows; the guesses' pairs grow with
    the square of the contacts): each first step's program is a fraction of the later steps', the
    start's the least."""
    from sparsedyn.contact.friction_kernel import _step_program
    from sparsedyn.contact.friction_problem import contact_slots
    from sparsedyn.symbolic.ir import CONST, MATMUL
    slots = contact_slots(MODEL, grid())
    prog = _step_program(MODEL, {"frames": slots.frames}, ())
    ops = [sum(1 for op, _, _ in prog.stages[k].nodes if CONST < op != MATMUL) for k in (11, 10, 9, 3)]
    assert ops[2] < ops[1] < 0.6 * ops[0] and ops[2] < 0.4 * ops[0], ops
    assert ops[3] < 0.6 * ops[0], ops                 # a later step without the guesses on pairs, stage 3


def test_a_later_step_leaves_out_the_guesses_on_pairs_where_none_applies():
    """A round's later step runs without its guesses on pairs of contacts (stage 3) and hands the step,
    the loop state untouched, to the one with them (stage 11: flag +8) where one of them applies; a
    tolerance no polish meets, 16 contacts on the box's bottom face (``PAIRS_APART``).
    From a resting answer (each ``m g dt / 16``, no friction: no pair of near-duplicates, none sliding)
    both stages give the same state and the same next stage, bit for bit.  With the last point moved 1 mm
    from the first, the two sharing the first's load, each sliding on its cone's circle against the other
    (friction ``+-mu n`` along x: a squeeze, :func:`~sparsedyn.contact.polish_guess.merge_guess`'s
    ``opposed``), stage 3 hands over and stage 11 changes the state.  Below 16 contacts stage 3 has the
    guesses (a box's four corners: it never hands over, and stage 11 is no program of the step's)."""
    from sparsedyn.contact.polish_guess import PAIRS_APART
    load = MASS * G * DT
    near = grid()[:15] + [sd.Contact("box", "3d", friction=MU, point=(-H + 1e-3, -H, -H), name="near")]
    squeeze = [[MU * load / 32, 0.0, load / 32], *[[0.0, 0.0, load / 16]] * 14, [-MU * load / 32, 0.0, load / 32]]
    assert len(grid()) == len(near) == PAIRS_APART
    for stage, z, pairs in ((points_stage(grid()), [[0.0, 0.0, load / 16]] * 16, False),
                            (points_stage(near), squeeze, True)):
        inputs, stages, lay, K, S = stage
        S = S.copy()
        S[lay.S["it"]], S[lay.S["tries"]], S[lay.S["pbest"]] = 100.0, 1.0, 1e300     # a round's second step
        S[lay.S["pz"]] = np.concatenate([np.ravel(z), np.zeros(3 * lay.nc - 3 * len(z))])   # (free slots: 0)
        (light, flag), (full, flag11) = stages[3](*inputs, K, S), stages[11](*inputs, K, S)
        if not pairs:
            assert np.array_equal(light, full) and float(flag) == float(flag11) + 8.0 != 8.0
        else:
            assert float(flag) == 8.0 and np.array_equal(light, S) and not np.array_equal(full, S)
    inputs, stages, lay, K, S = box_polish_stage()
    S[lay.S["it"]], S[lay.S["tries"]], S[lay.S["pz"]] = 100.0, 1.0, np.ravel(squeeze[:4])
    assert float(stages[3](*inputs, K, S)[1]) != 8.0 and float(stages[11](*inputs, K, S)[1]) == 1.0


def test_a_polish_squeezes_two_sticking_contacts_until_they_slide():
    """Two contacts at one point of a unit point mass (``G = [[I, I], [I, I]]``: the same rows), free velocities
    ``g = (+-s, 0, -v)``: no impulse zeroes both tangential velocities (their difference ``2 s`` is no velocity an
    impulse changes), so from an iterate where both stick (as ADMM leaves them, 3e-9 m/s apart on the dm_control
    humanoid) the mode system has no solution and its answer runs off along the squeeze.  The solution, by hand:
    the normal impulses carry ``v`` (``u_n = l_n1 + l_n2 - v = 0``), and the squeeze stops where the contacts reach
    their cones together (the same distance from them): ``lambda = (-v/2, 0, v/2), (v/2, 0, v/2)`` (``mu = 1``), each
    sliding at ``u = (+-s, 0, 0)`` against its friction.  One Newton step reaches it and passes the stopping test;
    the full step (``slips=0``: the cones no bound) puts both outside their cones and is rejected."""
    v, s = 0.05, 1e-9
    G2 = np.kron(np.ones((2, 2)), np.eye(3))
    g = np.array([s, 0.0, -v, -s, 0.0, -v])
    z = np.array([0.004, 0.0, v / 2, -0.004, 0.0, v / 2])
    args = (G2, g, np.ones(2), z, 2.0, np.ones(2), v, 1.0, TOL)
    lam, u, _, _, _, ok, conv = fp.polished(*args, steps=1)
    expected = np.array([-v / 2, 0.0, v / 2, v / 2, 0.0, v / 2])
    assert ok == 1.0 and conv == 1.0
    assert np.allclose(lam, expected, rtol=0, atol=rounding_bound(6, 1.0 / fp.EPS) * v), lam - expected
    assert np.allclose(u, [s, 0.0, 0.0, -s, 0.0, 0.0], rtol=0, atol=TOL * v), u
    assert fp.polished(*args, steps=1, slips=0.0)[5] == 0.0
