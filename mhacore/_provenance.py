"""Where a number came from: versions of the stack, the device, determinism settings."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as _md
import os
import platform
import sys

#: Distributions every chapter needs, by import name -> distribution name.
REQUIRED = {
    "numpy": "numpy",
    "scipy": "scipy",
    "torch": "torch",
    "sympy": "sympy",
    "matplotlib": "matplotlib",
    "sklearn": "scikit-learn",
    "statsmodels": "statsmodels",
    "tqdm": "tqdm",
}
#: Distributions needed only to build the book or run its tests.
OPTIONAL = {
    "jupyter_book": "jupyter-book",
    "sphinx": "sphinx",
    "myst_nb": "myst-nb",
    "jupytext": "jupytext",
    "nbval": "nbval",
    "pytest": "pytest",
    "hypothesis": "hypothesis",
    "safetensors": "safetensors",
}


def package_versions(names: dict[str, str]) -> dict[str, str | None]:
    """Installed version of each distribution, or None when it is missing."""
    versions = {}
    for import_name, dist in names.items():
        try:
            versions[dist] = _md.version(dist)
        except _md.PackageNotFoundError:
            versions[dist] = None
    return versions


def device_info() -> dict:
    """The torch devices, thread count and determinism settings of this process."""
    import torch

    info = {
        "torch_threads": torch.get_num_threads(),
        "cuda_available": torch.cuda.is_available(),
        "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
    }
    info["default_device"] = "cuda" if info["cuda_available"] else "cpu"
    return info


def provenance(command: list[str] | None = None) -> dict:
    """A record to store beside any result: date, machine, versions, devices, command."""
    from ._version import __version__

    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": list(sys.argv if command is None else command),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "mhacore": __version__,
        "packages": package_versions({**REQUIRED, **OPTIONAL}),
        "device": device_info(),
    }
