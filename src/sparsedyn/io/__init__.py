"""Readers and writers of model files: URDF (:mod:`.urdf`), MJCF through MuJoCo's compiler
(:mod:`.mjcf`), :func:`~.load.load_model` for either, a URDF's loop closures in a side file
(:mod:`.constraints`), and the shared reader of TOML/JSON side files (:mod:`sparsedyn.io.files`).  A parser builds a Model and nothing else."""
