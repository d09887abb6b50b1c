"""Reading the small TOML / JSON side files (loop closures, sensors) that sit next to a URDF."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def read_table(path, error=ValueError, what="file") -> dict:
    """The top-level table of a ``.toml`` or ``.json`` file.

    TOML is read with :mod:`tomllib` (Python >= 3.11) or ``tomli`` (Python 3.10).
    Every problem raises ``error`` with a message naming the file.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise error(f"{path}: cannot read the {what} ({e.strerror or e})") from None
    suffix = path.suffix.lower()
    if suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:                                   # pragma: no cover - Python 3.10
            import tomli as tomllib             # a dependency on 3.10 (pyproject.toml)
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise error(f"{path}: invalid TOML: {e}") from None
    if suffix != ".json":
        raise error(f"{path}: a {what} must end in .toml or .json")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}: invalid JSON: {e}") from None
