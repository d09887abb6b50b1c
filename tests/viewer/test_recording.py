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
