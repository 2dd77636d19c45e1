"""Format the code cells of MyST chapters with ruff (80 columns), in place: `make format`.

Only the code inside ```` ```{code-cell} ```` fences changes; the Markdown, the cell options
(``:tags:``) and everything else stay byte for byte. A cell ruff cannot parse (IPython
syntax, say) is left as it is and named. ``--check`` changes nothing and exits 1 when a
cell would change.

    python .ci/format_chapters.py [--check] book/01-nadaraya-watson.md ...
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

LINE_LENGTH = 80
CELL = re.compile(r"^(?P<open>```\{code-cell\}[^\n]*\n)(?P<options>(?::[\w-]+:[^\n]*\n)*\n?)"
                  r"(?P<code>.*?)^(?P<close>`{3,})[ \t]*$", re.S | re.M)
RUFF = [sys.executable, "-m", "ruff", "format", "--isolated", f"--line-length={LINE_LENGTH}"]


def format_codes(codes: list[str]) -> list[str | None]:
    """Each of ``codes`` formatted by ruff (one call for all), or None where ruff cannot
    parse it."""
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / f"cell_{i:04d}.py" for i in range(len(codes))]
        for path, code in zip(files, codes):
            path.write_text(code, encoding="utf-8")
        proc = subprocess.run([*RUFF, tmp], capture_output=True, text=True)
        failed = set(re.findall(r"cell_\d{4}\.py", proc.stderr))
        return [None if f.name in failed else f.read_text(encoding="utf-8") for f in files]


def format_chapter(text: str, name: str = "") -> tuple[str, list[str]]:
    """``text`` with every code cell formatted; and the cells left alone (unparsable)."""
    matches = [m for m in CELL.finditer(text) if m.group("code").strip()]
    formatted = dict(zip((m.start() for m in matches),
                         format_codes([m.group("code") for m in matches])))
    skipped = []

    def one(match):
        new = formatted.get(match.start(), match.group("code"))
        if new is None:
            skipped.append(f"{name}: {match.group('code').strip().splitlines()[0][:60]}")
            return match.group(0)
        return match.group("open") + match.group("options") + new + match.group("close")

    return CELL.sub(one, text), skipped


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = []
    for arg in (a for a in argv if a != "--check"):
        path = Path(arg)
        text = path.read_text(encoding="utf-8")
        new, skipped = format_chapter(text, path.name)
        for cell in skipped:
            print(f"not formatted (ruff cannot parse it): {cell}", file=sys.stderr)
        if new != text:
            changed.append(path.name)
            if not check:
                path.write_text(new, encoding="utf-8")
    verb = "would reformat" if check else "reformatted"
    print(f"{verb} {len(changed)} chapter(s): {', '.join(changed) or '-'}")
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
