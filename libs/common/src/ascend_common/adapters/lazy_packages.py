"""Keep third-party package code the services never run out of their resident memory.

Two libraries load far more at import than a service uses, and a Python module once loaded stays
resident for the life of the process:

- `import httpx` also imports its command-line client (httpx._main) when it can: click, and in an
  environment that has them (the dev venv) rich and pygments, 4-5 MB that no service calls.
- `kubernetes/__init__.py` imports every sub-package (dynamic with kubernetes_validate and jsonschema,
  stream with websocket, watch with pydoc, leaderelection, informer), 3-4 MB, where the services use
  `kubernetes.client` and `kubernetes.config` alone.

Each function here acts only if the package is not imported yet, so it must run before the first
import of it: the adapter packages that wrap these libraries call them from their __init__.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys


def skip_httpx_cli() -> None:
    """Make httpx's optional `from ._main import main` fail, as it does where click is not
    installed: httpx then defines a `main` that only says the CLI is unavailable."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: "not importable"


def bare_package(name: str) -> None:
    """Register package `name` without running its __init__: `from name import sub` then loads
    `sub` alone. A name the skipped __init__ would have set is still found on first access: a
    sub-package is imported (as `from name import sub` itself does), and any other name
    (`__version__`, a function the __init__ re-exports) runs the skipped __init__ then, so the
    package is whole for whoever needs more of it than its sub-packages. One difference remains:
    a sub-package that the __init__ shadows with a function of the same name
    (`kubernetes.utils.create_from_yaml`) is the sub-package until something has run the __init__."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return  # its parent is not installed: the ordinary import reports it as before
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed, or not a package: the ordinary import reports it as before
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    completed = False

    def missing(attr: str) -> object:
        nonlocal completed
        if importlib.util.find_spec(f"{name}.{attr}") is not None:
            return importlib.import_module(f"{name}.{attr}")
        if not completed:
            completed = True
            loader.exec_module(package)  # the skipped __init__, in the package's own namespace
            if attr in vars(package):
                return vars(package)[attr]
        raise AttributeError(f"module {name!r} has no attribute {attr!r}")

    vars(package)["__getattr__"] = missing  # PEP 562: consulted on a missing attribute
    sys.modules[name] = package
