"""Centre of pressure, zero-moment point and support polygon (sparsedyn.contact.pressure).

Against hand derivations: a box pushed sideways on its sole (static balance of moments), and a
humanoid standing still, whose contact wrenches come from the library's contact dynamics: its
zero-moment point is the ground projection of its centre of mass, and the force-weighted mean of
its soles' centres of pressure.
"""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.model.spatial import xlt

M, G, DX, ZC, H = 2.0, 9.81, 0.02, 0.15, 0.5


def box():
    b = sd.ModelBuilder("box", gravity=(0.0, 0.0, -G))
    b.add_body("box", None, sd.make_joint("free"), mass=M, com=[DX, 0, ZC], rot_inertia=0.01 * np.eye(3))
    b.add_frame("sole", "box", xlt(np.zeros(3)))
    return b.build()


def yawed(yaw, x=1.0, y=-0.5):
    return np.array([x, y, 0.0, 0, 0, np.sin(yaw / 2), np.cos(yaw / 2)])


def pushed_box_wrench(model, q, F):
    """The sole's wrench holding the box still under a push ``F`` (body x) at height ``H``."""
    f_ext = np.array([[0, H * F, 0, F, 0, 0]])          # body frame, about the body origin
    a, f = sd.contact_dynamics(model, q, np.zeros(6), np.zeros(6), [sd.Contact("sole")], f_ext=f_ext)
    np.testing.assert_allclose(a, 0, atol=1e-12)
    return f


@pytest.mark.parametrize("F, margin", [(0.0, 0.05), (3.0, 0.1 - DX - H * 3.0 / (M * G)),
                                       (5.0, 0.1 - DX - H * 5.0 / (M * G))])
def test_pushed_box_by_hand(F, margin):
    """Moments about the sole origin: the CoP moves from the CoM's projection ``DX`` by ``H F / (m g)``."""
    model = box()
    yaw = 0.4
    q = yawed(yaw)
    f = pushed_box_wrench(model, q, F)
    np.testing.assert_allclose(f, [0, -(DX * M * G + H * F), 0, -F, 0, M * G], atol=1e-12)
    x = DX + H * F / (M * G)
    R = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
    expected = np.array([1.0, -0.5, 0.0]) + R @ [x, 0, 0]
    cop = sd.center_of_pressure(model, q, ["sole"], f)
    np.testing.assert_allclose(cop.points[0], expected, atol=1e-14)
    np.testing.assert_allclose(cop.normal_force, [M * G], rtol=1e-14)
    zmp = sd.zero_moment_point(model, q, ["sole"], f, soles={"sole": (0.2, 0.1)})
    np.testing.assert_allclose(zmp.point, expected, atol=1e-14)
    np.testing.assert_allclose(zmp.margin, min(margin, 0.05), atol=1e-14)
    assert bool(zmp.inside) == (margin >= 0)
    # without a sole size the support is one point: only a centred load is on it
    assert not sd.zero_moment_point(model, q, ["sole"], f).inside


def test_batched_states_and_plain_lists():
    model = box()
    Q = np.stack([yawed(0.1), yawed(-0.7, 0.3, 0.2)])
    f = np.stack([pushed_box_wrench(model, Q[0], 1.0), pushed_box_wrench(model, Q[1], 4.0)])
    zmp = sd.zero_moment_point(model, Q, [sd.Contact("sole")], f, soles={"sole": [[0.1, 0.05], [0.1, -0.05],
                                                                               [-0.1, -0.05], [-0.1, 0.05]]})
    assert zmp.point.shape == (2, 3) and zmp.inside.shape == (2,)
    for k in range(2):
        one = sd.zero_moment_point(model, Q[k], ["sole"], list(f[k]), soles={"sole": (0.2, 0.1)})
        np.testing.assert_allclose(zmp.point[k], one.point, atol=1e-14)
        np.testing.assert_allclose(zmp.margin[k], one.margin, atol=1e-14)
    assert list(zmp.inside) == [True, False]


def standing_humanoid():
    """A humanoid standing still on both soles: torques that hold it (the base unactuated) and the
    contact wrenches of the library's contact dynamics under them."""
    model, q = sd.humanoid(), sd.humanoid_standing_configuration()
    soles = (sd.Contact("l_sole"), sd.Contact("r_sole"))
    J = np.vstack([sd.frame_jacobian(model, q, c.frame, "local") for c in soles])
    g = sd.rnea(model, q, np.zeros(model.nv), np.zeros(model.nv))
    lam = np.linalg.lstsq(J[:, :6].T, g[:6], rcond=None)[0]       # the base's balance, min-norm
    tau = g - J.T @ lam
    assert np.abs(tau[:6]).max() < 1e-10
    a, f = sd.contact_dynamics(model, q, np.zeros(model.nv), tau, soles)
    assert np.abs(a).max() < 1e-9                                  # it stands still
    return model, q, soles, f


def test_standing_humanoid_zmp_is_the_com_projection():
    model, q, soles, f = standing_humanoid()
    h = float(sd.frame_placement(model, q, "l_sole")[1][2])
    assert abs(h - float(sd.frame_placement(model, q, "r_sole")[1][2])) < 1e-12
    zmp = sd.zero_moment_point(model, q, soles, f, height=h, soles={"l_sole": (0.2, 0.1), "r_sole": (0.2, 0.1)})
    c = sd.center_of_mass(model, q)
    np.testing.assert_allclose(zmp.point, [c[0], c[1], h], atol=1e-10)
    np.testing.assert_allclose(zmp.normal_force, model.total_mass * np.linalg.norm(model.gravity), rtol=1e-10)
    assert zmp.inside and zmp.margin > 0
    # the force-weighted mean of the soles' centres of pressure (coplanar soles)
    cop = sd.center_of_pressure(model, q, soles, f)
    mean = cop.normal_force @ cop.points / cop.normal_force.sum()
    np.testing.assert_allclose(mean, zmp.point, atol=1e-10)
    # each CoP is where the sole's wrench has no moment in the sole plane (frame axes)
    for k, c in enumerate(soles):
        R, o = sd.frame_placement(model, q, c.frame)
        p = R.T @ (cop.points[k] - o)
        n, fk = f[6 * k:6 * k + 3], f[6 * k + 3:6 * k + 6]
        assert abs(p[2]) < 1e-14
        np.testing.assert_allclose((n - np.cross(p, fk))[:2], 0, atol=1e-10)
    # the same from a dict of wrenches (as an estimator returns them)
    again = sd.zero_moment_point(model, q, soles, {"l_sole": f[:6], "r_sole": f[6:]}, height=h)
    np.testing.assert_allclose(again.point, zmp.point, atol=1e-14)


def test_point_and_one_direction_contacts_press_at_their_origins():
    model, q, soles, f = standing_humanoid()
    pts = [sd.Contact("l_sole", "3d"), sd.Contact("r_sole", "1d", normal=(0, 0, 1))]
    cop = sd.center_of_pressure(model, q, pts, [1.0, 2.0, 300.0, 250.0])
    for k, c in enumerate(pts):
        np.testing.assert_allclose(cop.points[k], sd.frame_placement(model, q, c.frame)[1], atol=1e-15)
    np.testing.assert_allclose(cop.normal_force[1], 250.0)
    # a foot in the air has no centre of pressure
    lifted = sd.center_of_pressure(model, q, soles, np.concatenate([f[:6], np.zeros(6)]))
    assert np.all(np.isnan(lifted.points[1])) and lifted.normal_force[1] == 0
    poly = sd.support_polygon(model, q, soles, soles={"l_sole": (0.2, 0.1), "r_sole": (0.2, 0.1)})
    assert poly.shape[1] == 3 and len(poly) >= 4


def test_bad_input_is_named():
    model = box()
    q = yawed(0.0)
    with pytest.raises(ValueError, match=r"wrenches must be \(\.\.\., 6\)"):
        sd.center_of_pressure(model, q, ["sole"], np.zeros(3))
    with pytest.raises(ValueError, match="one entry per contact"):
        sd.zero_moment_point(model, q, ["sole"], {"foot": np.zeros(6)})
    with pytest.raises(ValueError, match="normal"):
        sd.zero_moment_point(model, q, ["sole"], np.zeros(6), normal=(0, 0, 0))
    with pytest.raises(ValueError, match=r"soles\['sole'\]"):
        sd.zero_moment_point(model, q, ["sole"], np.ones(6), soles={"sole": (1, 2, 3)})
