"""ascend_common.adapters.lazy_packages: a package registered without its __init__ still behaves
as one to code that imports from it or reads its sub-packages as attributes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path


def run(tmp_path: Path, body: str) -> str:
    pkg = tmp_path / "heavy"
    (pkg / "light").mkdir(parents=True)
    (pkg / "big").mkdir()
    (pkg / "__init__.py").write_text("from . import light, big\nVERSION = 1\n")
    (pkg / "light" / "__init__.py").write_text("X = 1\n")
    (pkg / "big" / "__init__.py").write_text("Y = 2\n")
    (pkg / "broken.py").write_text("import no_such_library_here\n")
    code = "import sys\nfrom ascend_common.adapters.lazy_packages import bare_package\n" + textwrap.dedent(body)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, cwd=tmp_path
    )
    return out.stdout.strip()


def test_a_bare_package_loads_only_the_submodule_imported(tmp_path: Path) -> None:
    body = """
        bare_package("heavy")
        from heavy import light
        print(light.X, "heavy.big" in sys.modules)
    """
    assert run(tmp_path, body) == "1 False"


def test_a_sub_package_read_as_an_attribute_is_imported_then(tmp_path: Path) -> None:
    body = """
        bare_package("heavy")
        import heavy
        print(heavy.big.Y, "heavy.big" in sys.modules)
        for name in ("nothing", "__version__"):
            try:
                getattr(heavy, name)
            except AttributeError:
                print("AttributeError", name)
        try:
            heavy.broken
        except ModuleNotFoundError as exc:
            print("missing", exc.name)
    """
    assert run(tmp_path, body).splitlines() == [
        "2 True",
        "AttributeError nothing",
        "AttributeError __version__",
        "missing no_such_library_here",
    ]


def test_a_name_only_the_init_defines_runs_the_skipped_init_then(tmp_path: Path) -> None:
    body = """
        bare_package("heavy")
        from heavy import light
        print("heavy.big" in sys.modules)
        import heavy
        print(heavy.VERSION, "heavy.big" in sys.modules)
    """
    assert run(tmp_path, body).splitlines() == ["False", "1 True"]


def test_the_kubernetes_packages_answer_every_name_their_init_exports() -> None:
    """What the adapters register bare stays whole for code that needs more than a sub-package:
    the version, and every name of `__all__`, resolve to what a full import gives."""
    probe = (
        "import json, sys\n"
        "{setup}\n"
        "import kubernetes, kubernetes.config, kubernetes.utils\n"
        "names = {{'kubernetes': ['__version__']}}\n"
        "for mod in (kubernetes.config, kubernetes.utils):\n"
        "    names[mod.__name__] = list(mod.__all__)\n"
        "def what(o): return [type(o).__name__, getattr(o, '__module__', None), getattr(o, '__qualname__', repr(o))]\n"
        "print(json.dumps({{m: {{n: what(getattr(sys.modules[m], n)) for n in ns}} for m, ns in names.items()}}))\n"
    )
    answers = []
    for setup in ("import ascend_common.adapters.kube", ""):
        code = probe.format(setup=setup)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
        answers.append(json.loads(out.stdout))
    bare, full = answers
    assert bare == full
    assert len(full["kubernetes.config"]) >= 5 and "load_kube_config" in full["kubernetes.config"]


def test_the_adapters_leave_the_kubernetes_init_unrun() -> None:
    code = (
        "import sys, ascend_common.adapters.kube.config\n"
        "from kubernetes import client\n"
        "print(sorted(m for m in ('kubernetes.dynamic', 'kubernetes.stream', 'kubernetes.watch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_a_package_already_imported_is_left_alone(tmp_path: Path) -> None:
    body = """
        import heavy
        bare_package("heavy")
        bare_package("not_installed_anywhere")
        print(heavy.VERSION, "not_installed_anywhere" in sys.modules)
    """
    assert run(tmp_path, body) == "1 False"


def test_httpx_loads_without_its_cli() -> None:
    code = (
        "import sys, ascend_common.adapters, httpx\n"
        "print(sorted(m for m in ('click', 'rich', 'pygments') if m in sys.modules), callable(httpx.main))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[] True"
