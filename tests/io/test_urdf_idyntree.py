"""iDynTree's top-level <sensor> force/torque tags read with iDynTree's own rule, against iDynTree.

iDynTree's URDF parser builds the sensor frame from the tag: ``frame="sensor"`` the ``<origin>`` pose
in the child link frame (torque about its origin), ``frame="child"`` the child link frame,
``frame="parent"`` the parent link frame (torque about the parent link's origin).  The oracle is
iDynTree itself (``idyntree`` on PyPI): its sensor frames (``getLinkSensorTransform``) and its
predicted measurements (``predictSensorsMeasurements``) at random states.
"""

import warnings

import idyntree.swig as idt
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sparsedyn import spatial as sp
from sparsedyn.estimation import EstimationProblem

INERTIAL = ('<inertial><origin xyz="{c}" rpy="0.2 -0.1 0.3"/><mass value="{m}"/>'
            '<inertia ixx="0.05" ixy="0.002" ixz="-0.001" iyy="0.06" iyz="0.003" izz="0.07"/></inertial>')
SENSOR = """<sensor name="{name}" type="force_torque"><parent joint="{joint}"/>
  <force_torque><frame>{frame}</frame><measure_direction>{direction}</measure_direction></force_torque>
  <origin xyz="0.3 -0.1 0.2" rpy="0.1 0.2 0.3"/></sensor>"""
URDF = f"""<robot name="ftbot">
  <link name="a">{INERTIAL.format(c="0 0 0.1", m=2)}</link>
  <link name="b">{INERTIAL.format(c="0.1 0 0.2", m=1.5)}</link>
  <link name="c">{INERTIAL.format(c="0 0.05 0.1", m=0.8)}</link>
  <link name="d">{INERTIAL.format(c="0.05 0 0.15", m=0.6)}</link>
  <joint name="j" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0.1 0.2 0.5" rpy="0.3 0 0"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="ft" type="fixed"><parent link="b"/><child link="c"/><origin xyz="0.05 0 0.4" rpy="0 0.4 0.2"/></joint>
  <joint name="k" type="revolute"><parent link="c"/><child link="d"/><origin xyz="0 0.1 0.3" rpy="0 0 0.5"/>
    <axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  {SENSOR.format(name="j_sensor", joint="j", frame="sensor", direction="child_to_parent")}
  {SENSOR.format(name="j_child", joint="j", frame="child", direction="parent_to_child")}
  {SENSOR.format(name="ft_sensor", joint="ft", frame="sensor", direction="parent_to_child")}
  {SENSOR.format(name="ft_child", joint="ft", frame="child", direction="child_to_parent")}
  {SENSOR.format(name="ft_parent", joint="ft", frame="parent", direction="child_to_parent")}
</robot>"""
NAMES = ["j_sensor", "j_child", "ft_sensor", "ft_child", "ft_parent"]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    path = tmp_path_factory.mktemp("idyntree") / "ftbot.urdf"
    path.write_text(URDF)
    loader = idt.ModelLoader()
    assert loader.loadModelFromFile(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                    # every tag is supported: no warning
        model = sd.load_urdf(path)
    # copies: the loader's model and sensors live only as long as the loader
    return model, idt.Model(loader.model()), idt.SensorsList(loader.sensors())


def idyntree_measurements(imodel, sensors, q, v, a):
    """iDynTree's predicted F/T readings {name: [n; f]} with the root link fixed (gravity -9.81 z)."""
    traversal = idt.Traversal()
    imodel.computeFullTreeTraversal(traversal)
    pos, vel, acc = idt.FreeFloatingPos(imodel), idt.FreeFloatingVel(imodel), idt.FreeFloatingAcc(imodel)
    pos.worldBasePos = idt.Transform.Identity()
    for k, name in enumerate(["j", "k"]):
        dof = imodel.getJointIndex(name)
        pos.jointPos.setVal(dof, q[k])
        vel.jointVel.setVal(dof, v[k])
        acc.jointAcc.setVal(dof, a[k])
    g = idt.Vector3()
    g.setVal(2, -9.81)
    ext = idt.LinkWrenches(imodel)
    ext.zero()
    meas = idt.SensorsMeasurements(sensors)
    assert idt.predictSensorsMeasurements(imodel, sensors, traversal, pos, vel, acc, g, ext, idt.FreeFloatingAcc(imodel),
                                          idt.LinkPositions(imodel), idt.LinkVelArray(imodel),
                                          idt.LinkAccArray(imodel), idt.LinkWrenches(imodel),
                                          idt.FreeFloatingGeneralizedTorques(imodel), meas)
    out = {}
    for i in range(sensors.getNrOfSensors(idt.SIX_AXIS_FORCE_TORQUE)):
        w = idt.Wrench()
        meas.getMeasurement(idt.SIX_AXIS_FORCE_TORQUE, i, w)
        f = w.toNumPy()
        out[sensors.getSixAxisForceTorqueSensor(i).getName()] = np.r_[f[3:], f[:3]]   # iDynTree: [f; n]
    return out


def test_sensor_frames_are_idyntree_sensor_frames(both):
    """The frame each reading is expressed in (about its origin) is iDynTree's sensor frame, seen from
    the child link: sparsedyn's frame_X_child equals the inverse of iDynTree's child_H_sensor."""
    model, imodel, sensors = both
    assert [s.name for s in model.sensors] == NAMES
    for i in range(sensors.getNrOfSensors(idt.SIX_AXIS_FORCE_TORQUE)):
        s = sensors.getSixAxisForceTorqueSensor(i)
        child = imodel.getLinkName(s.getSecondLinkIndex())
        H = idt.Transform()
        assert s.getLinkSensorTransform(s.getSecondLinkIndex(), H)
        R, p = H.getRotation().toNumPy(), H.getPosition().toNumPy()      # sensor pose in the child link
        ours = next(x for x in model.sensors if x.name == s.getName())
        frame = model.frames[model.frame(ours.frame or child)]
        child_frame = model.frames[model.frame(child)]
        assert frame.body == child_frame.body
        X = sp.compose(frame.X, sp.inverse(child_frame.X))               # sensor_X_child
        R2, p2 = sp.pose(X)
        assert rel_err(R2, R) < 1e-14 and rel_err(p2, p) < 1e-14, s.getName()


def test_readings_equal_idyntree_predictions(both):
    model, imodel, sensors = both
    problem = EstimationProblem(model)
    rng = np.random.default_rng(11)
    for _ in range(4):
        q, v, a = rng.uniform(-2, 2, size=(3, 2))
        theirs = idyntree_measurements(imodel, sensors, q, v, a)
        y, _ = problem.measurements(q[None], v[None], a[None])
        ours = problem.unpack(y)
        for name in NAMES:
            # two RNEA implementations: each within a recursion's rounding bound of the exact wrench
            assert rel_err(ours[name][0], theirs[name]) < 2 * rounding_bound(model.nbodies + 2), name
