"""Is every Debian package the build uses in `.ci/debian-packages.txt`?

A new machine has only the image's packages and what `.ci/install-debian` installs from
that list. A file that a PDF build or the browser opens therefore has to belong to a
listed package or to a package that one of them depends on (Depends and Pre-Depends:
the installer leaves recommendations out). The tests hand this module the files they saw
opened: the `.fls` recording of every TeX run (latexmk runs TeX with `-recorder`), the
font files behind the fonts a PDF embeds or Chromium draws with (found with fontconfig's
`fc-match`), and the executables they start. `unlisted` maps each file to its package
with `dpkg -S` and names every package outside the list's dependency closure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_LIST = ROOT / ".ci" / "debian-packages.txt"
# Written by the packages' own maintainer scripts (formats, font maps, caches): no
# package owns them, and each is made again on a new machine when the package installs.
GENERATED = ("/var/lib/texmf/", "/var/cache/", "/etc/texmf/", "/usr/share/texmf/ls-R",
             "/usr/share/texlive/texmf-dist/ls-R")


def have_dpkg() -> bool:
    return bool(shutil.which("dpkg") and shutil.which("dpkg-query"))


def listed_packages(path: Path = PACKAGE_LIST) -> set[str]:
    """The package names of `.ci/debian-packages.txt` (first word of each line)."""
    names = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            names.add(line.split()[0])
    return names


def _installed() -> tuple[dict[str, list[list[str]]], dict[str, set[str]]]:
    """Each installed package's dependencies (a list of alternative groups) and, for each
    virtual name, the installed packages that provide it."""
    fields = "${Package}\t${db:Status-Abbrev}\t${Depends}\t${Pre-Depends}\t${Provides}\n"
    out = subprocess.run(["dpkg-query", "-W", "-f", fields], capture_output=True,
                         text=True, check=True).stdout
    depends, provides = {}, {}
    for line in out.splitlines():
        name, status, *relations = line.split("\t")
        if not status.startswith("ii"):
            continue
        groups = []
        for relation in relations[:2]:
            for group in filter(None, (g.strip() for g in relation.split(","))):
                groups.append([re.split(r"[\s:(]", alt.strip())[0]
                               for alt in group.split("|")])
        depends[name] = groups
        for virtual in filter(None, (v.strip() for v in relations[2].split(","))):
            provides.setdefault(re.split(r"[\s(]", virtual)[0], set()).add(name)
    return depends, provides


def closure(packages: set[str]) -> set[str]:
    """The installed packages that installing ``packages`` pulls in: the packages
    themselves and, recursively, what they depend on. Of a group of alternatives
    (``a | b``) only one is needed: one already pulled in, or else the first that is
    installed, as apt picks it (a virtual name counts through its installed providers).
    Counting every installed alternative would hide a missing package: fontconfig-config
    accepts any of ten font packages."""
    depends, provides = _installed()

    def candidates(name):
        return ([name] if name in depends else []) + sorted(provides.get(name, ()))

    seen, todo = set(), list(packages)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for group in depends.get(name, []):
            options = [c for alt in group for c in candidates(alt)]
            if options and not any(c in seen or c in packages for c in options):
                todo.append(options[0])
    return seen


def owners(files) -> dict[str, str | None]:
    """The Debian package that owns each file (``None`` where none does). A file that
    dpkg does not know by the name it was opened under is looked up by its real path
    (TeX Live reaches much of its tree through symbolic links; /lib is /usr/lib)."""
    found: dict[str, str | None] = {}
    files = sorted(set(map(str, files)))

    def ask(paths):
        wanted, result = set(paths), {}
        for start in range(0, len(paths), 500):
            out = subprocess.run(["dpkg", "-S", *paths[start:start + 500]],
                                 capture_output=True, text=True, check=False).stdout
            for line in out.splitlines():  # "pkg[:arch][, pkg2...]: /path"
                packages, _, path = line.partition(": ")
                if path in wanted:  # a directory several packages share: the first
                    result[path] = packages.split(", ")[0].split(":")[0]
        return result

    direct = ask(files)
    for f in files:
        found[f] = direct.get(f)
    retry = {f: os.path.realpath(f) for f in files if found[f] is None}
    aliases = {}
    for f, real in retry.items():
        aliases.setdefault(real, []).append(f)
        if real.startswith("/usr/"):  # the merged /usr: dpkg may know the old name
            aliases.setdefault(real[4:], []).append(f)
    for path, package in ask(sorted(aliases)).items():
        for f in aliases[path]:
            found[f] = package
    return found


def recorded_inputs(fls: Path) -> set[str]:
    """The absolute paths of the files a TeX run read, from its `-recorder` file."""
    lines = Path(fls).read_text(encoding="utf-8", errors="replace").splitlines()
    pwd = next((line[4:] for line in lines if line.startswith("PWD ")), str(fls.parent))
    return {os.path.normpath(os.path.join(pwd, line[6:])) for line in lines
            if line.startswith("INPUT ")}


def font_files(families) -> dict[str, str]:
    """The file fontconfig picks for each font family name (a PDF's embedded fonts, the
    fonts Chromium reports): ``{family: path}``. A family fontconfig does not have is
    left out (the PDF or page tests fail on a missing font themselves)."""
    files = {}
    for family in sorted(set(families)):
        out = subprocess.run(["fc-match", "-f", "%{family}\t%{file}", family],
                             capture_output=True, text=True, check=False).stdout
        names, _, path = out.partition("\t")
        compact = family.replace(" ", "").lower()
        if path and any(n.replace(" ", "").lower() in compact
                        or compact.startswith(n.replace(" ", "").lower())
                        for n in names.split(",")):
            files[family] = path
    return files


def pdf_font_families(pdf: Path) -> set[str]:
    """The names of the fonts a PDF embeds, subset prefix and style suffix removed
    (``ABCDEF+FreeSerif-Bold`` is FreeSerif)."""
    rows = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True,
                          check=True).stdout.splitlines()[2:]
    return {re.sub(r"^[A-Z]{6}\+", "", row.split()[0]).split("-")[0] for row in rows}


def pdf_build_files(pdf: Path, latex_dir: Path) -> set[str]:
    """Every file the TeX runs of a PDF build read (the `.fls` recordings in
    ``latex_dir``), the font files behind the fonts ``pdf`` embeds, and the programs the
    build and its tests run."""
    recordings = list(Path(latex_dir).glob("*.fls"))
    assert recordings, "latexmk left no .fls recording (it runs TeX with -recorder)"
    files = set().union(*(recorded_inputs(f) for f in recordings))
    fonts = font_files(pdf_font_families(pdf))
    assert fonts, "fontconfig found none of the PDF's fonts"
    programs = {shutil.which(t) for t in ("xelatex", "latexmk", "kpsewhich", "pdfinfo",
                                          "pdftotext", "pdffonts")}
    return files | set(fonts.values()) | (programs - {None})


def without(package: str, tmp_dir: Path) -> Path:
    """A copy of the package list in ``tmp_dir`` with ``package`` left out."""
    shorter = Path(tmp_dir) / "debian-packages.txt"
    shorter.write_text("".join(
        line + "\n" for line in PACKAGE_LIST.read_text(encoding="utf-8").splitlines()
        if not line or line.split()[0] != package), encoding="utf-8")
    return shorter


def unlisted(files, *, allowed_dirs=(), package_list: Path = PACKAGE_LIST) -> list[str]:
    """Problems, one line each: a package that owns one of ``files`` but is neither in
    ``package_list`` nor a dependency of a listed package, and a file that no package
    owns outside ``allowed_dirs`` (the build's own folders) and the folders the
    packages' scripts fill."""
    owned = owners(files)
    allowed = tuple(str(Path(d).resolve()) + os.sep for d in allowed_dirs) + GENERATED
    covered = closure(listed_packages(package_list))
    orphans, missing = [], {}
    for path, package in sorted(owned.items()):
        if package is None:
            if not (path.startswith(allowed) or os.path.realpath(path).startswith(allowed)):
                orphans.append(f"no Debian package owns {path}")
        elif package not in covered:
            missing.setdefault(package, []).append(path)
    return orphans + [
        f"{package} (for {len(paths)} file(s), e.g. {paths[0]}) is not in "
        f"{Path(package_list).name} nor a dependency of a package listed there"
        for package, paths in sorted(missing.items())]
