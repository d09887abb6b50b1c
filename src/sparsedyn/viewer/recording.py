"""What the viewer writes out: :class:`Recording`, the part of :class:`~sparsedyn.Viewer` that
records its scene and trajectory as a standalone page or file, and renders screenshots."""

from __future__ import annotations

import numpy as np

from .overlays import Animation

__all__ = ["Recording", "sent"]


def sent(call, attempts=3):
    """``call()``'s value, called again (up to ``attempts`` times in all) where viser's wake-up of its
    sender raced the server's loop: viser sets an ``asyncio.Event`` from the caller's thread, which
    now and then raises ``RuntimeError("deque mutated during iteration")`` with the message already
    queued.  ``call`` must be safe to repeat (it sends the same state again); any other error, and
    the race ``attempts`` times in a row, are raised as they are."""
    for attempt in range(attempts):
        try:
            return call()
        except RuntimeError as err:
            if "mutated during iteration" not in str(err) or attempt == attempts - 1:
                raise


class Recording:
    """Recordings and screenshots of a :class:`~sparsedyn.Viewer` (its methods; a mix-in that uses
    the viewer's server, lock, player and trajectory)."""

    def _recorded(self, qs, dt, contacts, fps, what, progress=None):
        """A viser serializer holding the scene and the trajectory (``qs``, or the one :meth:`~sparsedyn.Viewer.play` got),
        one frame per ``1 / fps`` seconds; ``progress(message)`` is told every 30th frame."""
        with self._lock:
            was = self._playing
            self._playing = False
            if qs is not None:
                if dt is None:
                    raise ValueError(f"{what}: give dt (seconds between the samples of qs)")
                self.play(qs, dt, contacts=contacts, fps=fps, loop=False)
                self._playing = False
            serializer = self._server.get_scene_serializer()
            if self._traj is not None:
                n = len(self._traj[0])
                for k in range(n):
                    if progress is not None and k % 30 == 0:
                        progress(f"{what}: frame {k + 1} of {n}")
                    self._seek_frame(k)
                    serializer.insert_sleep(1.0 / self._traj[2])
            else:
                serializer.insert_sleep(1.0)
            self._playing = was and qs is None
        return serializer

    def record(self, path, qs=None, dt=None, *, contacts=None, fps=30.0, progress=None):
        """Write the scene and a trajectory to a standalone file a colleague can open: ``.html`` (one
        page with everything inside, opened by any browser without Python) or ``.viser`` (viser's
        recording format).  ``qs``, ``dt``, ``contacts``, ``fps`` as in :meth:`~sparsedyn.Viewer.play`; without ``qs``
        the trajectory given to :meth:`~sparsedyn.Viewer.play` (or the configuration shown) is recorded.
        ``progress``: a callable told ``"record: frame k of n"`` every 30 frames (a long recording
        takes seconds).  Returns the path.
        """
        from pathlib import Path
        path = Path(path)
        if path.suffix not in (".html", ".viser"):
            raise ValueError(f"record: {path}: the file name must end in .html (a standalone page) or .viser")
        serializer = self._recorded(qs, dt, contacts, fps, "record", progress)
        if path.suffix == ".html":
            path.write_text(serializer.as_html(), encoding="utf-8")
        else:
            path.write_bytes(serializer.serialize())
        return path

    def animation(self, qs=None, dt=None, *, contacts=None, fps=30.0, height=400):
        """The standalone page of :meth:`record` as an :class:`~sparsedyn.viewer.Animation`, which notebooks and the
        documentation's tutorials show inline (``height`` pixels high)."""
        return Animation(self._recorded(qs, dt, contacts, fps, "animation").as_html(), height)

    def screenshot(self, width=800, height=600, timeout=30.0) -> np.ndarray:
        """The picture (height, width, 3) uint8 a browser showing :attr:`~sparsedyn.Viewer.url` renders now (viser asks the
        first connected page to render), on the page's white background.  Raises ``RuntimeError``
        when no page is connected."""
        clients = self._server.get_clients()
        if not clients:
            raise RuntimeError(f"screenshot: no browser shows the viewer; open {self.url} first")
        client = clients[min(clients)]
        rgba = np.asarray(sent(lambda: client.get_render(height=int(height), width=int(width),
                                                         transport_format="png", timeout=timeout)), float)
        if rgba.shape[-1] == 3:
            return rgba.astype(np.uint8)
        # The canvas is transparent where nothing is drawn, and the page behind it is white.
        alpha = rgba[..., 3:] / 255.0
        return np.rint(rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8)

    def _repr_html_(self):
        return (f'<iframe src="{self.url}" width="100%" height="500" style="border:none"></iframe>'
                f'<p>sparsedyn viewer: <a href="{self.url}" target="_blank">{self.url}</a></p>')
