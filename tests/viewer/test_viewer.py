"""The viewer in a real browser: headless Chromium driven by Playwright opens ``viewer.url`` and
renders the robot with software WebGL (SwiftShader).

``make test`` installs what these tests need (the ``viewer`` extra, Playwright, Debian's
``chromium``).  A browser that cannot start fails the tests in CI (``CI=true``); elsewhere they are
skipped with the reason.  The tests without a browser run everywhere.
"""

import os
import shutil
import time
import warnings

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.viewer import MeshReadError, ViewerWarning, read_mesh

from erd import robot_path

CHROMIUM_ARGS = ["--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--use-gl=angle", "--no-sandbox",
                 "--disable-dev-shm-usage"]
PAGE = {"width": 800, "height": 1000}
#: The part of the page compared: below the page's notices and controls, above the axes icon.
CLIP = {"x": 0, "y": 380, "width": 800, "height": 540}


def _no_browser(reason):
    msg = (f"the viewer's browser tests cannot start Chromium: {reason}. Install it with 'make test' (as root it "
           f"runs apt-get install chromium) or set SPARSEDYN_CHROMIUM to a Chrome/Chromium executable")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _no_browser("the Python package 'playwright' is not installed")
    exe = os.environ.get("SPARSEDYN_CHROMIUM") or next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if exe is None:
        _no_browser("no chromium executable on PATH")
    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
    except Exception as e:           # noqa: BLE001 - any launch failure is reported the same way
        pw.stop()
        _no_browser(f"{exe} did not start ({type(e).__name__}: {str(e).splitlines()[0]})")
    yield b
    b.close()
    pw.stop()


class Page:
    """A browser page on a viewer, recording the page's errors."""

    def __init__(self, browser, url):
        self.page = browser.new_page(viewport=PAGE)
        self.errors = []
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error"
                     else None)
        self.page.goto(url)
        self.page.wait_for_selector("canvas", timeout=60_000)

    def picture(self):
        """The rendered scene (the page's :data:`CLIP`) as an (H, W, 3) array."""
        import io
        from PIL import Image
        png = self.page.screenshot(clip=CLIP, animations="disabled", timeout=120_000)
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)

    def settled(self, previous=None, timeout=60.0):
        """The picture once two in a row agree (and, given ``previous``, once it differs from it)."""
        end = time.monotonic() + timeout
        last = self.picture()
        while time.monotonic() < end:
            time.sleep(0.5)
            now = self.picture()
            if np.array_equal(now, last) and (previous is None or changed(now, previous) > 0):
                return now
            last = now
        return last

    def close(self):
        self.page.close()


def changed(a, b):
    """Fraction of pixels that differ between two pictures."""
    return float(np.mean(np.any(np.abs(a - b) > 8, axis=-1)))


@pytest.fixture(scope="module")
def panda():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sd.load_urdf(robot_path("panda"), geometry=True)


@pytest.fixture
def viewer(panda):
    v = sd.Viewer(panda, verbose=False, ground=False, compiled=False)
    yield v
    v.close()


def test_page_renders_the_robot_and_follows_display(browser, viewer, panda):
    page = Page(browser, viewer.url)
    try:
        shown = page.settled()
        assert np.mean(np.any(shown < 230, axis=-1)) > 0.005         # the robot is drawn on the white page
        viewer._server.scene.set_global_visibility(False)        # the same page without the scene
        empty = page.settled(shown)
        viewer._server.scene.set_global_visibility(True)
        again = page.settled(empty)
        covered = changed(shown, empty)
        assert covered > 0.01                                        # the robot covers > 1% of the canvas
        # and comes back the same, up to the anti-aliasing of its outline (a few % of its own pixels)
        assert changed(again, shown) < 0.05 * covered
        q = panda.neutral()
        q[1], q[3] = -1.2, -2.5                                      # shoulder and elbow
        viewer.display(q)
        moved = page.settled(shown)
        assert changed(moved, shown) > 0.005
        viewer.display(panda.neutral())
        assert changed(page.settled(moved), shown) < 0.05 * covered
        # overlays and the collision shapes change the picture too
        viewer.set_geometry("collision")
        assert viewer.kind == "collision" and changed(page.settled(shown), shown) > 0.001
        viewer.show(frames=True)
        assert changed(page.settled(), shown) > 0.001
        img = viewer.screenshot(320, 240)                            # rendered by the connected page
        assert img.shape == (240, 320, 3) and img.dtype == np.uint8 and img.std() > 5
        assert page.errors == []
    finally:
        page.close()


def test_trajectory_plays_subsampled_with_a_timeline(browser, viewer, panda):
    page = Page(browser, viewer.url)
    try:
        start = page.settled()
        T, dt = 2001, 1e-3                                           # 2 s at 1 kHz
        t = np.arange(T) * dt
        qs = np.tile(panda.neutral(), (T, 1))
        qs[:, 0] = 2.5 * np.sin(np.pi * t)                           # base yaw
        qs[:, 3] = -1.5 - np.sin(np.pi * t)
        viewer.play(qs, dt, fps=30, loop=False)
        assert len(viewer._traj[0]) == 61                            # 2 s at 30 frames per second
        np.testing.assert_array_equal(viewer._traj[0][30], qs[1000])  # frame k shows sample round(k / fps / dt)
        time.sleep(0.8)
        assert viewer.playing and 0.2 < viewer.time < 2.0
        viewer.pause()                         # software rendering is slow: pictures of a still page
        mid = page.settled(start)
        viewer.resume()
        while viewer.playing:
            time.sleep(0.1)
        assert viewer.time == pytest.approx(2.0)                     # played to the end, then stopped
        end = page.settled()
        assert changed(end, start) > 0.005 and changed(mid, start) > 0.001 and changed(end, mid) > 0.001
        viewer.seek(0.5)
        assert viewer.time == pytest.approx(0.5) and not viewer.playing
        np.testing.assert_array_equal(viewer.q, qs[500])
        viewer.resume()
        time.sleep(0.5)
        viewer.pause()
        t_paused = viewer.time
        time.sleep(0.4)
        assert viewer.time == t_paused > 0.5
        assert page.errors == []
    finally:
        page.close()


def test_recording_is_a_standalone_page(browser, viewer, panda, tmp_path):
    T, dt = 101, 0.01
    qs = np.tile(panda.neutral(), (T, 1))
    qs[:, 1] = np.linspace(0, -1.5, T)
    path = viewer.record(tmp_path / "panda.html", qs, dt, fps=20)
    viewer.close()                                                    # the file needs no server
    page = browser.new_page(viewport=PAGE)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.resolve().as_uri())
        page.wait_for_selector("canvas", timeout=60_000)
        time.sleep(3)
        import io
        from PIL import Image
        # the page plays the recording without pause, so one picture (software rendering is slow)
        pic = np.asarray(Image.open(io.BytesIO(page.screenshot(clip=CLIP, timeout=180_000))).convert("RGB"))
        assert np.mean(np.any(pic < 230, axis=-1)) > 0.005           # the robot is drawn on the white page
        assert errors == []
    finally:
        page.close()
    with pytest.raises(ValueError, match="must end in .html"):
        viewer.record(tmp_path / "x.txt")


# --- without a browser ------------------------------------------------------------------

def test_port_in_use_gives_the_next_free_one(panda):
    a = sd.Viewer(panda, verbose=False, compiled=False)
    try:
        port = int(a.url.rsplit(":", 1)[1])
        b = sd.Viewer(panda, verbose=False, port=port, compiled=False)
        try:
            assert int(b.url.rsplit(":", 1)[1]) > port
        finally:
            b.close()
    finally:
        a.close()


URDF = """<robot name="meshes">
  <link name="base"><visual><geometry><mesh filename="{good}"/></geometry></visual>
    <visual><geometry><mesh filename="{missing}"/></geometry></visual>
    <visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual></link>
  <link name="arm"><visual><geometry><mesh filename="{bad}"/></geometry></visual></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>"""


def _mesh_model(tmp_path, bad_bytes, bad_name="bad.stl"):
    good = robot_path("panda").parents[1] / "meshes" / "collision" / "link0.stl"
    (tmp_path / bad_name).write_bytes(bad_bytes)
    xml = URDF.format(good=good, missing=tmp_path / "nowhere.stl", bad=tmp_path / bad_name)
    (tmp_path / "m.urdf").write_text(xml)
    return sd.load_urdf(tmp_path / "m.urdf", geometry=True)


@pytest.mark.parametrize("bad_bytes, bad_name", [(b"\x00\x01garbage" * 3, "bad.stl"), (b"solid x\n", "bad.qqq")])
def test_missing_mesh_warns_once_and_bad_mesh_is_a_labelled_box(tmp_path, bad_bytes, bad_name):
    model = _mesh_model(tmp_path, bad_bytes, bad_name)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        v = sd.Viewer(model, verbose=False)          # the kinematics compile in the background meanwhile
    try:
        msgs = [str(x.message) for x in w if issubclass(x.category, ViewerWarning)]
        assert len(msgs) == 2
        assert "1 visual mesh file(s) not found" in msgs[0] and "nowhere.stl (base_1)" in msgs[0]
        assert "cannot be read" in msgs[1] and bad_name in msgs[1]
        names = sorted(h.name for h in v._shapes["visual"])
        # the good mesh, the box, and a wire box plus label for the bad mesh; nothing for the missing one
        assert names == ["/robot/b0/visual/3", "/robot/b0/visual/3/why", "/robot/world/visual/0",
                         "/robot/world/visual/2"]
        labels = [h for h in v._shapes["visual"] if h.name.endswith("/why")]
        assert len(labels) == 1 and "arm_0: cannot read" in labels[0].text
    finally:
        v.close()
    with pytest.raises(MeshReadError, match=bad_name):
        read_mesh(str(tmp_path / bad_name))


def test_contact_arrows_start_at_the_frame_along_the_world_force(panda):
    v = sd.Viewer(panda, verbose=False, compiled=False)
    try:
        q = panda.random_configuration(3)
        v.display(q)
        f_local = np.array([0.0, 0.0, 0.0, 1.0, -2.0, 30.0])              # [n; f] in the frame's axes
        v.show_contacts({"panda_hand": f_local, "panda_link4": np.array([5.0, 0, 0])}, scale=0.01)
        R, p = sd.frame_placement(panda, q, "panda_hand")
        R4, p4 = sd.frame_placement(panda, q, "panda_link4")
        pts = np.asarray(v._contact_handles[1].points)
        np.testing.assert_allclose(pts[0], [p, p + 0.01 * R @ f_local[3:]], rtol=0, atol=1e-6)    # float32
        np.testing.assert_allclose(pts[1], [p4, p4 + 0.01 * R4 @ [5.0, 0, 0]], rtol=0, atol=1e-6)
        with pytest.raises(KeyError, match="no frame 'panda_hnd'; closest: panda_hand"):
            v.show_contacts({"panda_hnd": np.zeros(3)})
        with pytest.raises(ValueError, match=r"expected a finite wrench \(6,\) or force \(3,\)"):
            v.show_contacts({"panda_hand": np.zeros(4)})
        v.show_contacts(None)
        assert v._contact_handles == ()
    finally:
        v.close()


def test_bad_arguments_are_named(panda):
    v = sd.Viewer(panda, verbose=False, compiled=False)
    try:
        with pytest.raises(ValueError, match="play: qs must have shape"):
            v.play(np.zeros((5, panda.nq + 1)), 0.01)
        with pytest.raises(ValueError, match="dt and fps must be positive"):
            v.play(np.zeros((5, panda.nq)), 0.0)
        with pytest.raises(ValueError, match="display: q must be one configuration"):
            v.display(np.zeros((2, panda.nq)))
        with pytest.raises(ValueError, match="kind: expected one of"):
            v.set_geometry("visuals")
        with pytest.raises(RuntimeError, match="no browser shows the viewer"):
            v.screenshot()
        with pytest.raises(RuntimeError, match="call play"):
            v.seek(1.0)
    finally:
        v.close()


def test_model_without_shapes_is_drawn_as_a_skeleton():
    model = sd.humanoid()
    v = sd.Viewer(model, verbose=False, compiled=False)
    try:
        balls = [h for h in v._shapes["visual"] if h.name.endswith("/ball")]
        assert len(balls) == model.nbodies
        v.display(model.random_configuration(0))
    finally:
        v.close()


def test_mjcf_meshes_and_primitives_are_drawn_without_warnings():
    from pathlib import Path
    import dm_control
    path = Path(dm_control.__file__).parent / "suite" / "dog.xml"          # compiled meshes, capsules, a plane
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.MjcfWarning)
        model = sd.load_mjcf(path, geometry=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ViewerWarning)
        v = sd.Viewer(model, verbose=False, compiled=False)
    try:
        assert len(v._shapes["visual"]) == len(model.geometry("visual"))
        v.set_geometry("collision")
        assert len(v._shapes["collision"]) == len(model.geometry("collision"))
        assert all(not h.visible for h in v._shapes["visual"]) and all(h.visible for h in v._shapes["collision"])
        v.display(model.random_configuration(0))
    finally:
        v.close()


def test_recording_shows_inline_and_saves(panda, tmp_path):
    import html
    v = sd.Viewer(panda, verbose=False, compiled=False)
    try:
        qs = np.tile(panda.neutral(), (21, 1))
        rec = v.animation(qs, 0.05, fps=10, height=300)                 # 1 s at 10 frames/s: 11 frames
    finally:
        v.close()
    assert "window.__VISER_EMBED_DATA__=" in rec.html
    inline = rec._repr_html_()
    assert inline.startswith('<iframe srcdoc="') and 'height="300"' in inline
    assert html.unescape(inline.split('srcdoc="', 1)[1].split('" width=', 1)[0]) == rec.html
    assert rec.save(tmp_path / "r.html").read_text() == rec.html


def test_contact_forces_of_an_estimate_are_drawn_at_their_frames():
    from sparsedyn.estimation.casestudy import case_problems, consistent_state
    model = sd.humanoid()
    rng = np.random.default_rng(5)
    for problem in case_problems(model).values():               # the first well-posed case with contacts
        if problem.contacts:
            try:
                estimator = problem.analyze()
                break
            except sd.IllPosedError:
                continue
    q, v, a, wrenches = consistent_state(problem, rng)
    y = problem.measurements(q, v, a, wrenches)[0]
    estimate = estimator.solve(q, v, y)
    viewer = sd.Viewer(model, verbose=False, compiled=False, q=q)
    try:
        viewer.show_contacts(estimate, scale=0.002)
        pts = np.asarray(viewer._contact_handles[1].points, float)
        assert len(pts) == len(problem.contacts)
        for k, c in enumerate(problem.contacts):
            R, p = sd.frame_placement(model, q, c.frame)
            f = wrenches[c.name][3:]                    # the true forces: the noise-free estimate recovers them
            np.testing.assert_allclose(pts[k, 0], p, rtol=0, atol=1e-6)
            np.testing.assert_allclose(pts[k, 1], p + 0.002 * R @ f, rtol=0, atol=1e-5)
    finally:
        viewer.close()


def _robot_pixels(img):
    """Where a picture on the white page is not background."""
    return np.any(np.asarray(img, int) < 230, axis=-1)


def test_screenshot_is_the_page_white_and_the_camera_frames_the_robot(browser, panda):
    """With the defaults, the picture ``screenshot()`` returns shows the panda on the white page (not on
    black) and the camera framing it: the robot spans most of the picture's height, clear of the
    edges."""
    v = sd.Viewer(panda, ground=False, compiled=False)
    page = Page(browser, v.url)
    try:
        page.settled()
        img = v.screenshot(400, 300)
        assert img.shape == (300, 400, 3) and img.dtype == np.uint8
        for corner in (img[:10, :10], img[:10, -10:], img[-10:, :10], img[-10:, -10:]):
            assert corner.min() >= 250                                # the page's white
        robot = _robot_pixels(img)
        rows, cols = np.flatnonzero(robot.any(1)), np.flatnonzero(robot.any(0))
        assert rows[-1] - rows[0] + 1 >= 0.5 * img.shape[0], (rows[0], rows[-1])
        assert rows[0] > 0 and rows[-1] < img.shape[0] - 1 and cols[0] > 0 and cols[-1] < img.shape[1] - 1
        assert robot.mean() > 0.02                                  # its shading: the panda is white
        assert page.errors == []
    finally:
        page.close()
        v.close()


def test_the_viewer_guide_example_runs_as_printed_and_looks_right(browser, tmp_path, monkeypatch):
    """docs/guide/viewer.rst's blocks, run as printed up to the last line (``viewer.close()``): the
    trajectory keeps every joint within its limits (the fingers at the hand), and the page shows the
    robot."""
    from test_docs import ROOT, rst_python_blocks
    monkeypatch.chdir(tmp_path)
    blocks = rst_python_blocks((ROOT / "docs" / "guide" / "viewer.rst").read_text())
    ns = {"__name__": "__docs__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.UrdfWarning)
        exec(compile(blocks[0], "viewer.rst, Python block 1", "exec"), ns)
    body, last = blocks[1].rstrip().rsplit("\n", 1)
    assert last == "viewer.close()"
    exec(compile(body, "viewer.rst, Python block 2", "exec"), ns)
    model, qs, viewer = ns["model"], ns["qs"], ns["viewer"]
    try:
        assert np.all(qs >= model.lower) and np.all(qs <= model.upper)
        _, hand = sd.frame_placement(model, qs, "panda_hand")
        for finger in ("panda_leftfinger", "panda_rightfinger"):
            assert np.linalg.norm(sd.frame_placement(model, qs, finger)[1] - hand, axis=-1).max() < 0.1
        assert (tmp_path / "wave.html").stat().st_size > 0
        page = Page(browser, viewer.url)
        try:
            page.settled()
            img = viewer.screenshot(400, 300)
            assert _robot_pixels(img).mean() > 0.02 and img[:10, :10].min() >= 250
            assert page.errors == []
        finally:
            page.close()
    finally:
        exec(compile(last, "viewer.rst, Python block 2", "exec"), ns)


def test_stand_puts_the_lowest_point_of_the_shapes_on_the_floor():
    """talos_reduced with a floating base, through ``sparsedyn view`` without a motion: the lowest
    vertex of its shapes, posed by geometry_placements, is at z = 0."""
    from sparsedyn import cli
    from sparsedyn.viewer import shape_mesh
    shown = {}
    close = sd.Viewer.close

    def record_close(self):
        shown.setdefault("q", self.q)
        close(self)
    mp = pytest.MonkeyPatch()
    mp.setattr(sd.Viewer, "close", record_close)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sd.UrdfWarning)
            assert cli.main(["view", "talos_reduced", "--floating-base", "--seconds", "0", "--port", "8470"]) == 0
            model = sd.load_model("talos_reduced", floating_base=True, geometry=True)
    finally:
        mp.undo()
    q = shown["q"]
    R, p = sd.geometry_placements(model, q, "visual")
    low = min(float(np.min(np.asarray(shape_mesh(g).vertices) @ R[k].T[:, 2] + p[k, 2]))
              for k, g in enumerate(model.geometry("visual")))
    assert abs(low) < 1e-12 and q[2] > 0.9                          # standing, the base about 1 m up
    v = sd.Viewer(sd.load_urdf(robot_path("panda")), compiled=False)
    try:
        with pytest.raises(ValueError, match="stand: model 'panda' has no floating base"):
            v.stand()
    finally:
        v.close()


def test_viewer_is_quiet_and_cli_prints_its_url_first_when_piped(tmp_path, capfd):
    """Without verbose=True nothing of viser's is printed; ``sparsedyn view`` into a pipe prints its URL
    line, and only that, at once; ``--save`` of a motion tells its progress."""
    import subprocess
    import sys
    v = sd.Viewer(sd.humanoid(), compiled=False)
    v.close()
    out = capfd.readouterr()
    assert "viser" not in out.out + out.err
    r = subprocess.Popen([sys.executable, "-m", "sparsedyn", "view", "humanoid", "--seconds", "60", "--port", "8480"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = r.stdout.readline()                  # arrives while the viewer serves, not at its exit
        assert first.startswith("sparsedyn: viewer of 'humanoid' at http://127.0.0.1:") and r.poll() is None
    finally:
        r.terminate()
        rest, err = r.communicate(timeout=60)
    assert "viser" not in rest + err
    from sparsedyn import cli
    model = sd.humanoid()
    qs = np.tile(model.neutral(), (200, 1))
    np.save(tmp_path / "m.npy", qs)
    assert cli.main(["view", "humanoid", "--q", str(tmp_path / "m.npy"), "--dt", "0.01",
                     "--save", str(tmp_path / "m.html")]) == 0
    out = capfd.readouterr()
    assert ".. record: frame 1 of 60" in out.err and f"sparsedyn: wrote {tmp_path / 'm.html'}" in out.out


def test_contact_arrows_are_drawn_to_the_robots_scale():
    """The humanoid's weight on one sole: an arrow longer than a quarter of the robot's height, and
    thicker than a tenth of that length (it was 0.5 m and 8 mm whatever the robot)."""
    model = sd.humanoid()
    q = sd.humanoid_standing_configuration()
    v = sd.Viewer(model, compiled=False, q=q)
    try:
        weight = model.total_mass * 9.81
        v.show_contacts({"l_sole": np.array([0.0, 0, 0, 0, 0, weight])})
        pts = np.asarray(v._contact_handles[1].points, float)
        _, p = sd.frame_placements(model, q)
        height = p[:, 2].max() - p[:, 2].min()
        length = np.linalg.norm(pts[0, 1] - pts[0, 0])
        assert length > 0.25 * height
        np.testing.assert_allclose((pts[0, 1] - pts[0, 0]) / length, [0, 0, 1], atol=1e-6)    # sole axes = world
        assert v._contact_handles[1].shaft_radius > 0.01 * length
    finally:
        v.close()
