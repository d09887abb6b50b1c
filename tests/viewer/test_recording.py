"""Screenshots (sparsedyn.viewer.recording) without a browser: a stand-in for viser's connected page
answers ``get_render``, so what ``screenshot`` makes of the answer and of viser's failures is checked
against values computed by hand.

By hand: a pixel of colour c and opacity a on the white page shows c a + 255 (1 - a).
"""

import numpy as np
import pytest

import sparsedyn as sd

RACE = "deque mutated during iteration"


class Page:
    """A connected page whose first ``failures`` renders raise ``error`` and later ones return ``rgba``."""

    def __init__(self, rgba, failures=0, error=RACE):
        self.rgba, self.failures, self.error, self.calls = rgba, failures, error, 0

    def get_render(self, height, width, transport_format, timeout):
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(self.error)
        return self.rgba


def viewer_with(page, monkeypatch):
    model = sd.ModelBuilder("arm").add_body("link", None, sd.make_joint("revolute", axis=[0, 0, 1]),
                                            mass=1.0, rot_inertia=np.eye(3)).build()
    v = sd.Viewer(model, verbose=False, ground=False, compiled=False)
    monkeypatch.setattr(v._server, "get_clients", lambda: {3: page})
    return v


RGBA = np.array([[[255, 0, 0, 255], [0, 0, 255, 0]], [[0, 255, 0, 51], [10, 20, 30, 255]]], np.uint8)
ON_WHITE = np.array([[[255, 0, 0], [255, 255, 255]], [[204, 255, 204], [10, 20, 30]]], np.uint8)


def test_a_transparent_pixel_shows_the_white_page_behind_it(monkeypatch):
    v = viewer_with(Page(RGBA), monkeypatch)
    try:
        img = v.screenshot(2, 2)
        assert img.dtype == np.uint8 and np.array_equal(img, ON_WHITE)
    finally:
        v.close()


def test_visers_thread_race_is_asked_again_and_other_errors_are_raised(monkeypatch):
    """viser's sender is woken from the caller's thread and now and then raises "deque mutated during
    iteration" with the request already queued: the screenshot asks again (up to three times); any
    other failure, and a race three times in a row, reach the caller as they are."""
    page = Page(RGBA, failures=2)
    v = viewer_with(page, monkeypatch)
    try:
        assert np.array_equal(v.screenshot(2, 2), ON_WHITE) and page.calls == 3
        page.calls, page.failures = 0, 3
        with pytest.raises(RuntimeError, match=RACE):
            v.screenshot(2, 2)
        assert page.calls == 3
        page.calls, page.failures, page.error = 0, 1, "the page went away"
        with pytest.raises(RuntimeError, match="the page went away"):
            v.screenshot(2, 2)
        assert page.calls == 1
    finally:
        v.close()


class RacedQueue:
    """viser's scene-message queue whose first ``failures`` messages are queued and then raise the race
    (as viser's wake-up does after buffering the message); records every message queued."""

    def __init__(self, real, failures, error=RACE):
        self.real, self.failures, self.error, self.messages = real, failures, error, []

    def __call__(self, message):
        self.real(message)
        self.messages.append(message)
        if len(self.messages) <= self.failures:
            raise RuntimeError(self.error)


def test_display_sends_its_pose_again_after_visers_race_and_raises_other_errors(monkeypatch):
    """The race on a pose message sends the whole pose again: the last message of each body is its
    pose at ``q`` (a hinge about z at angle a: orientation (cos a/2, 0, 0, sin a/2), at the origin),
    and the viewer holds ``q``; a race three times in a row, or another error, reaches the caller."""
    v = viewer_with(Page(RGBA), monkeypatch)
    try:
        name = v._bodies[0].name
        for failures, error, raised in ((2, RACE, False), (3, RACE, True), (1, "the page went away", True)):
            queue = RacedQueue(v._server.scene._queue_scene_message, failures, error)
            monkeypatch.setattr(v._server.scene, "_queue_scene_message", queue)
            a = 0.6 + failures
            if raised:
                with pytest.raises(RuntimeError, match=error):
                    v.display([a])
                assert len(queue.messages) == (1 if error != RACE else 3)
                continue
            v.display([a])
            assert v.q.tolist() == [a] and len(queue.messages) == failures + 2     # a raced try sends one
            last = {type(m).__name__: m for m in queue.messages if m.name == name}
            np.testing.assert_allclose(last["SetOrientationMessage"].wxyz, [np.cos(a / 2), 0, 0, np.sin(a / 2)],
                                       rtol=0, atol=4 * np.finfo(float).eps)
            assert last["SetPositionMessage"].position == (0.0, 0.0, 0.0)
    finally:
        v.close()
