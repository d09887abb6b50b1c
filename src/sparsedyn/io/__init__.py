"""Readers and writers of model files: URDF (:mod:`.urdf`) and the shared reader
of TOML/JSON side files (:mod:`.files`).  A parser builds a Model and nothing else."""
