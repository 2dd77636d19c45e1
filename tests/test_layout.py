"""The package's two wings and the direction of its imports.

The import graph of ``mhacore`` is read from the source with ``ast`` (every import
statement, also those inside functions; importing ``a.b.c`` runs the packages ``a.b``
too) and must have no circle; the science wing (the top of ``mhacore/``) never imports
the editions wing (``mhacore/editions/``). The command line is the one exception: its
``teach`` subcommand imports the editions, inside that subcommand only, so ``doctor``,
``check`` and ``sweep`` never load them (tested by running them).
"""

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mhacore"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str], package_dir: Path = PACKAGE) -> set[str]:
    """The ``mhacore`` modules that ``path`` imports (``from . import x`` names module
    ``x`` where one exists, else the package it names)."""
    name = module_name(path, package_dir)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # a.b.c -> the module a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
            # importing a.b.c first runs the packages a and a.b: an edge to each, but not
            # to the packages that hold this module (Python has run them already)
            parent = target.rpartition(".")[0]
            while parent and not (name == parent or name.startswith(parent + ".")):
                found.add(parent)
                parent = parent.rpartition(".")[0]
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    paths = sorted(package.rglob("*.py"))
    modules = {module_name(p, package) for p in paths}
    return {module_name(p, package): imported_modules(p, modules, package) for p in paths}


def test_the_import_graph_has_no_circle():
    graph = import_graph()
    assert len(graph) > 30
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"import circle: {' -> '.join(error.args[1])}")
    assert order.index("mhacore._validation") < order.index("mhacore.nw")


def test_the_science_never_imports_the_editions():
    graph = import_graph()
    science = {m for m in graph if not m.startswith("mhacore.editions")}
    crossing = {m: sorted(t for t in graph[m] if t.startswith("mhacore.editions"))
                for m in science - {"mhacore.__main__"}}  # teach, a subcommand: see below
    assert not {m: t for m, t in crossing.items() if t}


def test_doctor_check_and_sweep_never_load_the_editions():
    """Only ``teach`` imports the editions wing: the other subcommands run without what
    it needs (PyYAML, nbformat), as after a plain ``pip install mhacore``."""
    import subprocess
    import sys

    code = ("import sys\n"
            "sys.modules['yaml'] = None  # as if PyYAML were not installed\n"
            "from mhacore.__main__ import main\n"
            "for argv in (['doctor'], ['check', '--theorem', 'head-is-nw'],\n"
            "             ['sweep', 'heads-width-fixed', '--size', 'tiny']):\n"
            "    assert main(argv) == 0, argv\n"
            "loaded = [m for m in sys.modules if m.startswith('mhacore.editions')]\n"
            "assert not loaded, loaded\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_the_edition_modules_share_one_module_and_import_nothing_back():
    graph = import_graph()
    assert graph["mhacore.editions.common"] <= {"mhacore._version"}
    assert "mhacore.editions.common" in graph["mhacore.editions.reader"]
    for low in ("mhacore.editions.reader", "mhacore.editions.references",
                "mhacore.editions.outdir", "mhacore.editions.common"):
        above = {"mhacore.editions.teach", "mhacore.editions.grading",
                 "mhacore.editions.answer_key", "mhacore.editions.slides"}
        assert not graph[low] & above, (low, graph[low] & above)


def test_the_checker_finds_a_circle(tmp_path):
    """The graph reader sees an import inside a function and a relative import."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .b import g\n")
    (package / "b.py").write_text("from pkg import a\n\ndef g():\n    pass\n")
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter(graph).static_order())
