"""``Viewer``: a model in the browser (viser), posed by the model's own kinematics.

The scene has one node per body (its world pose, from :func:`~sparsedyn.forward_kinematics`) with
the body's shapes as children at their fixed placements (:class:`~sparsedyn.model.Geometry`), so
``display(q)`` sends one pose per body whatever the number of meshes.  Shapes fixed to the world sit
on a fixed node.  A model without shapes of the chosen kind is drawn as a skeleton: a sphere at each
body origin and a rod to each child joint.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import threading
import time
import warnings

import numpy as np

from .. import _checks
from ..kernels import compile_owner
from ..algorithms.com import center_of_mass
from ..algorithms.kinematics import forward_kinematics, frame_placements
from ..model import GEOMETRY_KINDS
from ..model.spatial import pose
from .framing import camera_pose, posed_points, shape_parts, standing
from .meshes import need, shape_meshes
from .overlays import Animation, contact_forces, contact_items
from .recording import Recording, sent
from .scene_view import WorldContacts, checked_scene, rollout_contacts, world_geometries

__all__ = ["Viewer", "ViewerWarning", "Animation"]

_GREY = (0.7, 0.7, 0.72, 1.0)
_SPEEDS = ("0.1", "0.25", "0.5", "1", "2", "4")


class ViewerWarning(UserWarning):
    """Shapes the viewer cannot draw (a missing or unreadable mesh file); the others are drawn."""


def _viser():
    return need("viser")


def _wxyz(R):
    """Quaternions ``[w, x, y, z]`` (..., 4) of rotation matrices (..., 3, 3) (viser's order)."""
    from viser.transforms import SO3
    return SO3.from_matrix(np.asarray(R, float)).wxyz


def _rgb(rgba):
    return tuple(int(round(255 * c)) for c in rgba[:3])


class Viewer(Recording):
    """A model in a local web page (viser): ``display(q)``, ``play(qs, dt)``, overlays, animations::

        viewer = sd.Viewer(sd.load_urdf(path, geometry=True))
        viewer.url                   # 'http://127.0.0.1:8080': open it in a browser
        viewer.display(q)

    ``model``: a :class:`~sparsedyn.model.Model`; its shapes (``load_urdf(..., geometry=True)``) are
    drawn, meshes read on first use (``pip install 'sparsedyn[viewer]'``).  ``kind``: ``"visual"`` or
    ``"collision"`` shapes first (switch with :meth:`set_geometry` or the page's controls).  ``host``,
    ``port``: where the page is served; a port in use gives the next free one (``viewer.url`` says
    which).  ``frames``, ``com``, ``joint_names``: overlays shown from the start (body frames as axes,
    the centre of mass as a red ball, joint names as labels at the joints); the page has a checkbox
    for each.  ``q``: the first configuration (default: the model's neutral one).  ``ground``: a grid
    in the plane z = 0.  ``compiled``: pose the bodies with the compiled forward kinematics
    (:func:`sparsedyn.compile`, built in the background on first use; NumPy's until it is ready).
    ``verbose``: let viser print its banner, a line per browser connection and one when it stops
    (quiet by default).  ``scene``: a :class:`~sparsedyn.Scene` of ``model`` whose world shapes are
    drawn (:meth:`show_scene`), and in which :meth:`play` draws a rollout's contacts.  Recordings and
    screenshots: :class:`~sparsedyn.viewer.recording.Recording`'s methods (``record``, ``animation``,
    ``screenshot``).

    New pages open with the camera framed on the shapes at the first configuration; :meth:`stand`
    puts a floating-base robot on the floor.

    A missing mesh file gives one :class:`ViewerWarning` naming every such file, and the other shapes
    are drawn; a file that cannot be read (unsupported format, corrupt) is drawn as a red wire box
    (10 cm) labelled with the reason, and warned about the same way.
    """

    def __init__(self, model, *, kind="visual", host="127.0.0.1", port=8080, q=None, frames=False, com=False,
                 joint_names=False, ground=True, compiled=True, verbose=False, scene=None):
        if kind not in GEOMETRY_KINDS:
            raise ValueError(f"kind: expected one of {GEOMETRY_KINDS}, got {kind!r}")
        viser = _viser()
        self.model = model
        world = scene                              # the name scene is viser's scene graph below
        self._verbose = bool(verbose)
        with contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO()):
            self._server = server = viser.ViserServer(host=host, port=port, verbose=verbose)   # prints its address
        atexit.unregister(server.stop)             # stopped by close(), at exit too, quietly unless verbose
        atexit.register(self.close)
        shown = "localhost" if host in ("", "0.0.0.0", "::") else host
        #: The address of the page.
        self.url = f"http://{shown}:{server.get_port()}"
        self._lock = threading.RLock()
        scene = server.scene
        scene.set_up_direction("+z")
        if ground:
            scene.add_grid("/ground", width=4.0, height=4.0, cell_size=0.25, section_size=1.0)
        self._bodies = [scene.add_frame(f"/robot/b{i}", show_axes=frames, axes_length=0.12, axes_radius=0.004)
                        for i in range(model.nbodies)]
        scene.add_frame("/robot/world", show_axes=False)
        self._labels = [scene.add_label(f"/robot/b{i}/joint_name", model.joint_names[i], visible=joint_names)
                        for i in range(model.nbodies)]
        self._com = scene.add_icosphere("/overlay/com", radius=0.03, color=(230, 30, 30), visible=com)
        self._shapes = {}
        self._parts = {}                 # kind -> [(body, points in body coordinates)]: framing, standing
        self._contacts = None            # (frames, forces (nc, 3) or (nc, 6)) of the current contact overlay
        self._contact_scale = None
        self._size = 1.0                 # the robot's size [m], set with the camera (_frame_camera)
        self._contact_handles = ()
        self._q = model.neutral() if q is None else _checks.configuration(model, q)
        self._kind = None
        self._traj = None                # (qs (n, nq), contacts per frame or None, fps)
        self._frame = 0
        self._playing = False
        self._speed = 1.0
        self._loop = True
        self._clock = None
        self._closed = False
        self._kinematics = model                  # the compiled model once its build is done
        self._scene, self._scene_handles = None, ()
        self._gui()
        if world is not None:
            self.show_scene(world)
        self.set_geometry(kind)
        self.display(self._q)
        self._frame_camera()
        if compiled:
            threading.Thread(target=self._compile, name="sparsedyn-viewer-compile", daemon=True).start()

    def _frame_camera(self):
        """Point the camera of new pages at the shapes shown, posed at the configuration shown: the
        sphere about their bounding box's centre fills the view."""
        cam = self._server.initial_camera
        points = posed_points(self.model, self._q, self._parts[self._kind])
        position, look_at = camera_pose(points, cam.fov)
        # The robot's size (its bounding box's diagonal) scales the contact arrows.
        self._size = max(float(np.linalg.norm(points.max(0) - points.min(0))), 0.1) if len(points) else 1.0
        cam.look_at = tuple(look_at)
        cam.position = tuple(position)

    def stand(self, q=None):
        """Show ``q`` (default: the configuration shown) with the floating base moved vertically so
        that the lowest point of the shapes shown touches the floor (z = 0), and frame the camera of
        new pages on it; returns that configuration.  ``ValueError`` for a model without a free root
        joint."""
        q = self._q if q is None else _checks.configuration(self.model, q)
        with self._lock:
            q = standing(self.model, q, self._parts[self._kind])
            self.display(q)
            self._frame_camera()
        return q

    def _compile(self):
        """Build the compiled forward kinematics (background thread), through the compiler's public
        hook (:func:`~sparsedyn.kernels.compile_owner`); when the build fails, NumPy's kinematics stay."""
        try:
            with np.errstate(all="ignore"):             # thread-local: constant folding of the trace
                k = compile_owner(self.model, progress=False)
                k.forward_kinematics(self.model.neutral())
            self._kinematics = k
        except Exception:                                # noqa: BLE001 - the NumPy path answers
            pass

    # --- scene ------------------------------------------------------------------------------
    def _gui(self):
        gui = self._server.gui
        with gui.add_folder("Model"):
            self._gui_kind = gui.add_dropdown("Geometry", GEOMETRY_KINDS, initial_value=GEOMETRY_KINDS[0])
            self._gui_frames = gui.add_checkbox("Body frames", self._bodies[0].show_axes if self._bodies else False)
            self._gui_com = gui.add_checkbox("Centre of mass", self._com.visible)
            self._gui_names = gui.add_checkbox("Joint names", bool(self._labels and self._labels[0].visible))
        self._gui_kind.on_update(lambda _: self.set_geometry(self._gui_kind.value))
        self._gui_frames.on_update(lambda _: self.show(frames=self._gui_frames.value))
        self._gui_com.on_update(lambda _: self.show(com=self._gui_com.value))
        self._gui_names.on_update(lambda _: self.show(joint_names=self._gui_names.value))
        self._gui_time = None

    def _node(self, body):
        return "/robot/world" if body < 0 else f"/robot/b{body}"

    def _build(self, kind):
        """Scene nodes of the shapes of ``kind`` (or the skeleton when the model has none)."""
        scene, model = self._server.scene, self.model
        geoms = model.geometry(kind)
        handles = []
        if not geoms:
            return self._skeleton(kind)
        meshes, missing, unreadable = shape_meshes(geoms)
        self._parts[kind] = shape_parts(geoms, meshes)
        bad = {id(g): why for g, why in unreadable}
        for k, (g, mesh) in enumerate(zip(geoms, meshes)):
            R, p = pose(g.X)
            name = f"{self._node(g.body)}/{kind}/{k}"
            place = dict(wxyz=_wxyz(R), position=np.asarray(p, float))
            if mesh is None and id(g) in bad:
                handles.append(scene.add_box(name, color=(230, 30, 30), dimensions=(0.1, 0.1, 0.1), wireframe=True,
                                             **place))
                handles.append(scene.add_label(f"{name}/why", f"{g.name}: cannot read {g.mesh}", **place))
            elif mesh is None:
                continue
            elif g.rgba is None and g.shape == "mesh" and g.mesh is not None and \
                    getattr(getattr(mesh, "visual", None), "kind", None) is not None:
                handles.append(scene.add_mesh_trimesh(name, mesh, **place))          # the file's own colours
            else:
                rgba = g.rgba or _GREY
                handles.append(scene.add_mesh_simple(name, np.asarray(mesh.vertices, np.float32),
                                                     np.asarray(mesh.faces, np.uint32), color=_rgb(rgba),
                                                     opacity=None if rgba[3] >= 1 else rgba[3], **place))
        if missing:
            warnings.warn(f"model {model.name!r}: {len(missing)} {kind} mesh file(s) not found, not drawn: "
                          + ", ".join(f"{g.mesh} ({g.name})" for g in missing), ViewerWarning,
                          stacklevel=_checks.user_stacklevel())
        if unreadable:
            warnings.warn(f"model {model.name!r}: {len(unreadable)} {kind} mesh file(s) cannot be read, drawn as "
                          f"labelled boxes: " + "; ".join(why for _, why in unreadable), ViewerWarning,
                          stacklevel=_checks.user_stacklevel())
        return handles

    def _skeleton(self, kind):
        """A ball at every body origin, a rod from each body to its children's joints, and from a body
        without children to its centre of mass."""
        from ..model.spatial import inertia_components
        scene, model = self._server.scene, self.model
        c = need("trimesh").creation
        ball = c.icosphere(subdivisions=2, radius=0.025)
        handles = []
        self._parts[kind] = [(i, np.asarray(ball.vertices, float)) for i in range(model.nbodies)]

        def rod(node, name, r):
            if float(np.linalg.norm(r)) > 1e-9:
                m = c.cylinder(radius=0.008, segment=np.array([np.zeros(3), r]))
                handles.append(scene.add_mesh_simple(f"{node}/{kind}/{name}", m.vertices, m.faces,
                                                     color=(150, 150, 160)))

        for i in range(model.nbodies):
            handles.append(scene.add_mesh_simple(f"/robot/b{i}/{kind}/ball", ball.vertices, ball.faces,
                                                 color=(90, 140, 220)))
            p = model.parent[i]
            if not (p < 0 and model.joints[i].type == "free"):
                rod(self._node(p), f"rod{i}", pose(model.Xtree[i])[1])      # joint i in its parent's frame
            if model.subtree_end[i] == i + 1:                               # a leaf: to its centre of mass
                rod(self._node(i), "com", inertia_components(model.inertia[i])[1])
        return handles

    def show_scene(self, scene):
        """Draw the world shapes of ``scene`` (a :class:`~sparsedyn.Scene` of this viewer's model) beside
        the model's own, in grey, replacing the scene drawn before; :meth:`play` then draws the contacts of
        a rollout in it."""
        scene = checked_scene(self.model, scene)
        with self._lock:
            for h in self._scene_handles:
                h.remove()
            handles = []
            geoms = world_geometries(scene)
            meshes, missing, unreadable = shape_meshes(geoms)
            for k, (g, mesh) in enumerate(zip(geoms, meshes)):
                if mesh is None:
                    continue
                R, p = pose(g.X)
                handles.append(self._server.scene.add_mesh_simple(
                    f"/scene/{k}", np.asarray(mesh.vertices, np.float32), np.asarray(mesh.faces, np.uint32),
                    color=_rgb(g.rgba), wxyz=_wxyz(R), position=np.asarray(p, float)))
            if missing or unreadable:
                warnings.warn(f"scene: {len(missing) + len(unreadable)} world mesh(es) cannot be read, not drawn: "
                              + ", ".join(g.name for g in missing + [g for g, _ in unreadable]), ViewerWarning,
                              stacklevel=_checks.user_stacklevel())
            self._scene, self._scene_handles = scene, tuple(handles)

    def set_geometry(self, kind):
        """Show the ``"visual"`` or the ``"collision"`` shapes (read on first use)."""
        if kind not in GEOMETRY_KINDS:
            raise ValueError(f"kind: expected one of {GEOMETRY_KINDS}, got {kind!r}")
        with self._lock:
            if kind not in self._shapes:
                self._shapes[kind] = self._build(kind)
            for k, handles in self._shapes.items():
                for h in handles:
                    h.visible = k == kind
            self._kind = kind
            if self._gui_kind.value != kind:
                self._gui_kind.value = kind

    @property
    def kind(self) -> str:
        """The kind of shapes shown (``"visual"`` or ``"collision"``)."""
        return self._kind

    def show(self, *, frames=None, com=None, joint_names=None):
        """Switch overlays on or off: body ``frames`` (axes), the centre of mass (``com``), ``joint_names``."""
        with self._lock:
            if frames is not None:
                for h in self._bodies:
                    h.show_axes = bool(frames)
                self._gui_frames.value = bool(frames)
            if com is not None:
                self._com.visible = bool(com)
                self._gui_com.value = bool(com)
            if joint_names is not None:
                for h in self._labels:
                    h.visible = bool(joint_names)
                self._gui_names.value = bool(joint_names)

    # --- display ----------------------------------------------------------------------------
    def display(self, q, contacts=None):
        """Pose the model at ``q`` (nq,) (and draw ``contacts``, see :meth:`show_contacts`)."""
        q = _checks.configuration(self.model, q)
        if q.ndim != 1:
            raise ValueError(f"display: q must be one configuration of shape ({self.model.nq},), got {q.shape}; "
                             f"play(qs, dt) shows a trajectory")
        R, p = forward_kinematics(self._kinematics, q)
        quats = _wxyz(R)
        sent(lambda: self._posed(q, quats, p, contacts))

    def _posed(self, q, quats, p, contacts):
        """Send the pose of :meth:`display` (its bodies' orientations ``quats`` and positions ``p``)."""
        with self._lock, self._server.atomic():
            self._q = q
            self._pose_bodies(quats, p)
            if self._com.visible:
                self._com.position = center_of_mass(self.model, q)
            if contacts is not None:
                self.show_contacts(contacts)
            elif self._contacts is not None:
                self._draw_contacts()

    def _pose_bodies(self, quats, p):
        """Send the body poses: viser's pose messages queued directly (a handle's setter compares
        each value with the last one first, which costs most of the time), else the setters."""
        queue = getattr(self._server.scene, "_queue_scene_message", None)
        try:
            from viser import _messages as msgs
        except ImportError:
            msgs = None
        if queue is None or not hasattr(msgs, "SetOrientationMessage") or not hasattr(msgs, "SetPositionMessage"):
            for h, w, x in zip(self._bodies, quats, p):
                h.wxyz, h.position = w, x
            return
        for h, w, x in zip(self._bodies, quats.tolist(), p.tolist()):
            queue(msgs.SetOrientationMessage(h.name, tuple(w)))
            queue(msgs.SetPositionMessage(h.name, tuple(x)))

    @property
    def q(self) -> np.ndarray:
        """The configuration shown."""
        return self._q.copy()

    def show_contacts(self, forces, scale=None):
        """Draw contact points and force arrows at the current configuration.

        ``forces``: ``{frame name: force}`` with a wrench ``[n; f]`` (6,) or a force ``f`` (3,) on the
        robot at the frame's origin, in the frame's axes (the estimation layer's convention), or an
        estimate (:class:`~sparsedyn.estimation.Estimate`, its contacts at their frames); ``None``
        removes the overlay.  Each arrow starts at the contact point and is ``scale`` metres per
        newton long (default: the robot's weight is half the robot's size, the diagonal of its
        bounding box), as thick as the robot's size says.  Red balls mark the points.
        """
        with self._lock:
            if forces is None:
                self._contacts = None
                for h in self._contact_handles:
                    h.remove()
                self._contact_handles = ()
                return
            self._contacts = contact_forces(self.model, forces)
            if scale is not None:
                self._contact_scale = float(scale)
            sent(self._draw_contacts)

    def _draw_contacts(self):
        if isinstance(self._contacts, WorldContacts):          # a scene's contacts: points, forces in the world
            start, force = self._contacts
        else:
            names, F = self._contacts
            Rf, pf = frame_placements(self.model, self._q)
            idx = [self.model.frame(n) for n in names]
            f = F[:, 3:] if F.shape[-1] == 6 else F
            start, force = pf[idx], (Rf[idx] @ f[..., None])[..., 0]
        weight = max(self.model.total_mass * float(np.linalg.norm(self.model.gravity)), 1e-9)
        size = self._size
        scale = self._contact_scale or 0.5 * size / weight
        end = start + scale * force
        scene = self._server.scene
        handles, self._contact_handles = self._contact_handles, ()     # (each removed once, if sent again)
        for h in handles:
            h.remove()
        if not len(start):
            return
        self._contact_handles = (
            scene.add_point_cloud("/overlay/contacts/points", start.astype(np.float32), colors=(230, 30, 30),
                                  point_size=0.03 * size, point_shape="circle"),
            scene.add_arrows("/overlay/contacts/arrows", np.stack([start, end], 1).astype(np.float32),
                             colors=(230, 120, 30), shaft_radius=0.008 * size, head_radius=0.02 * size,
                             head_length=0.05 * size))

    # --- trajectories -----------------------------------------------------------------------
    def play(self, qs, dt, *, contacts=None, fps=30.0, speed=1.0, loop=True, block=False):
        """Play the trajectory ``qs`` (T, nq) sampled every ``dt`` seconds, with a timeline on the page
        (play / pause, a time slider to scrub, the speed, looping).

        The trajectory is subsampled to ``fps`` frames per second of trajectory time (a 10 s, 1 kHz
        trajectory shows 300 frames).  ``contacts``: ``{frame: forces (T, 6) or (T, 3)}`` drawn with
        each frame (see :meth:`show_contacts`).  ``qs`` may be a :func:`~sparsedyn.rollout`'s result; one in
        the scene shown (:meth:`show_scene`) draws its contacts with each frame: a ball at each contact
        point and an arrow of the contact force, the step's impulse over ``dt``.  ``block=True`` returns when the trajectory has played
        once (``loop`` is then ignored); otherwise it plays in the background (:meth:`pause`,
        :meth:`resume`, :meth:`seek`).
        """
        world = None
        if hasattr(qs, "impulses") and hasattr(qs, "q"):               # a rollout
            if isinstance(qs.impulses, list):                          # in a scene
                if self._scene is None:
                    raise ValueError("play: a rollout in a scene draws its contacts in that scene; give it to the "
                                     "viewer first (Viewer(model, scene=scene) or viewer.show_scene(scene))")
                world = rollout_contacts(self._scene, np.asarray(qs.q, float), np.asarray(qs.v, float), qs.impulses,
                                         float(dt))
            qs = qs.q
        qs = np.asarray(qs, float)
        if qs.ndim != 2 or qs.shape[1] != self.model.nq or len(qs) == 0:
            raise ValueError(f"play: qs must have shape (T, {self.model.nq}) with T >= 1, got {qs.shape}")
        if not (np.isfinite(dt) and dt > 0) or not (np.isfinite(fps) and fps > 0):
            raise ValueError(f"play: dt and fps must be positive, got dt={dt}, fps={fps}")
        for k in range(len(qs)):
            _checks.configuration(self.model, qs[k])
        duration = (len(qs) - 1) * dt
        n = int(np.floor(duration * fps + 1e-9)) + 1
        idx = np.minimum(np.rint(np.arange(n) / fps / dt).astype(int), len(qs) - 1)
        per_frame = None if world is None else [world[k] for k in idx]
        if contacts is not None:
            per_frame = {}
            for name, F in contact_items(self.model, contacts):
                F = np.asarray(F, float)
                if F.ndim != 2 or len(F) != len(qs):
                    raise ValueError(f"play: contacts[{name!r}] must have one force per sample, shape "
                                     f"({len(qs)}, 6) or ({len(qs)}, 3), got {F.shape}")
                per_frame[name] = F[idx]
        with self._lock:
            if not isinstance(per_frame, list) and isinstance(self._contacts, WorldContacts):
                self.show_contacts(None)               # a previous rollout's contacts belong to its frames
            self._traj = (qs[idx], per_frame, float(fps))
            self._speed, self._loop = float(speed), bool(loop)
            self._timeline(n, fps)
            self._seek_frame(0)
            self._playing = True
            self._clock = (time.perf_counter(), 0.0)
        self._start_player()
        if block:
            self._loop = False
            while self._playing and not self._closed:
                time.sleep(0.02)

    def _timeline(self, n, fps):
        gui = self._server.gui
        t_end = max((n - 1) / fps, 1.0 / fps)
        if self._gui_time is None:
            with gui.add_folder("Playback"):
                self._gui_time = gui.add_slider("Time [s]", min=0.0, max=t_end, step=1.0 / fps, initial_value=0.0)
                self._gui_play = gui.add_button("Play / pause")
                self._gui_speed = gui.add_dropdown("Speed", _SPEEDS, initial_value="1")
                self._gui_loop = gui.add_checkbox("Loop", True)
            self._gui_time.on_update(lambda _: self._scrubbed())
            self._gui_play.on_click(lambda _: self.pause() if self._playing else self.resume())
            self._gui_speed.on_update(lambda _: self._set_speed(float(self._gui_speed.value)))
            self._gui_loop.on_update(lambda _: setattr(self, "_loop", bool(self._gui_loop.value)))
        else:
            self._gui_time.max = t_end
            self._gui_time.step = 1.0 / fps
        self._gui_loop.value = self._loop
        if str(self._speed).rstrip("0").rstrip(".") in _SPEEDS:
            self._gui_speed.value = str(self._speed).rstrip("0").rstrip(".")

    def _set_speed(self, speed):
        with self._lock:
            self._clock = (time.perf_counter(), self.time)
            self._speed = speed

    def _scrubbed(self):
        """The time slider moved (by the user, or by the player): show that frame."""
        if self._traj is None:
            return
        k = int(round(self._gui_time.value * self._traj[2]))
        if k != self._frame:
            with self._lock:
                self._clock = (time.perf_counter(), k / self._traj[2])
                self._show_frame(k)

    def _show_frame(self, k):
        qs, contacts, _ = self._traj
        k = int(min(max(k, 0), len(qs) - 1))
        self._frame = k
        if isinstance(contacts, list):                 # a scene's contacts (world points and forces) per frame
            self._contacts = contacts[k]
            self.display(qs[k])
        else:
            self.display(qs[k], None if contacts is None else {n: F[k] for n, F in contacts.items()})

    def _seek_frame(self, k):
        self._show_frame(k)
        if self._gui_time is not None:
            sent(lambda: setattr(self._gui_time, "value", self._frame / self._traj[2]))

    def _start_player(self):
        if getattr(self, "_player", None) is not None and self._player.is_alive():
            return
        self._player = threading.Thread(target=self._run, name="sparsedyn-viewer-player", daemon=True)
        self._player.start()

    def _run(self):
        while not self._closed:
            with self._lock:
                if self._playing and self._traj is not None:
                    n, fps = len(self._traj[0]), self._traj[2]
                    t0, start = self._clock
                    t = start + (time.perf_counter() - t0) * self._speed
                    k = int(t * fps)
                    if k >= n:
                        if self._loop:
                            self._clock, k = (time.perf_counter(), 0.0), 0
                        else:
                            k, self._playing = n - 1, False
                    if k != self._frame:
                        self._seek_frame(k)
                fps = self._traj[2] if self._traj is not None else 30.0
            time.sleep(min(1.0 / fps, 0.05) / 2)

    @property
    def playing(self) -> bool:
        """Whether a trajectory is playing."""
        return self._playing

    @property
    def time(self) -> float:
        """Trajectory time [s] of the frame shown."""
        return 0.0 if self._traj is None else self._frame / self._traj[2]

    def pause(self):
        """Stop the trajectory at the frame shown."""
        with self._lock:
            self._playing = False

    def resume(self):
        """Play on from the frame shown (from the start after the end)."""
        with self._lock:
            if self._traj is None:
                raise RuntimeError("resume: no trajectory; call play(qs, dt) first")
            if self._frame >= len(self._traj[0]) - 1:
                self._seek_frame(0)
            self._clock = (time.perf_counter(), self.time)
            self._playing = True
        self._start_player()

    def seek(self, t):
        """Show the frame at trajectory time ``t`` [s] (playing goes on from there)."""
        with self._lock:
            if self._traj is None:
                raise RuntimeError("seek: no trajectory; call play(qs, dt) first")
            self._seek_frame(int(round(float(t) * self._traj[2])))
            self._clock = (time.perf_counter(), self.time)

    def close(self):
        """Stop playing and stop the web server."""
        atexit.unregister(self.close)
        if self._closed:
            return
        self._closed = True
        # viser says "Server stopped" from its thread, which stop() joins.
        with contextlib.nullcontext() if self._verbose else contextlib.redirect_stdout(io.StringIO()):
            self._server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"Viewer({self.model.name!r}, {self.url}, {self._kind})"
