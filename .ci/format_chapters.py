"""Format the code cells of MyST chapters with ruff (80 columns), in place: `make format`.

Only the code inside ```` ```{code-cell} ```` fences changes; the Markdown, the cell options
(``:tags:``) and everything else stay byte for byte. A cell ruff cannot parse (IPython
syntax, say) is left as it is and named. ``--check`` changes nothing and exits 1 when a
cell would change.

ruff leaves long comments and strings as they are. Before it runs, lines over 80 columns
are fitted: a long comment is wrapped (a trailing one moves above its line), and a long
string that stands alone on a line inside brackets is split into adjacent literals (which
Python joins). A cell is changed only when its syntax tree stays the same; the lines that
are still too long are named, to shorten by hand.

    python .ci/format_chapters.py [--check] book/01-nadaraya-watson.md ...
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tempfile
import textwrap
import tokenize
from pathlib import Path

LINE_LENGTH = 80
CELL = re.compile(r"^(?P<open>```\{code-cell\}[^\n]*\n)(?P<options>(?::[\w-]+:[^\n]*\n)*\n?)"
                  r"(?P<code>.*?)^(?P<close>`{3,})[ \t]*$", re.S | re.M)
RUFF = [sys.executable, "-m", "ruff", "format", "--isolated", f"--line-length={LINE_LENGTH}"]


def _wrap_comment(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, LINE_LENGTH, initial_indent=f"{indent}# ",
                         subsequent_indent=f"{indent}# ", break_long_words=False,
                         break_on_hyphens=False) or [f"{indent}#"]


def _split_string(token: str, room: int) -> tuple[str, str] | None:
    """``token`` (one-line string literal) as two literals, the first at most ``room``
    characters long, split after a space outside any f-string placeholder."""
    match = re.match(r"(?P<prefix>[rRbBuUfF]*)(?P<quote>['\"])(?P<body>.*)(?P=quote)$", token)
    if not match or token.endswith(match.group("quote") * 3):
        return None
    prefix, quote, body = match.group("prefix", "quote", "body")
    fstring, depth, best = "f" in prefix.lower(), 0, None
    for i, char in enumerate(body):
        if fstring and char in "{}":
            depth += 1 if char == "{" else -1
        if char == " " and depth == 0 and body[i - 1:i] != "\\":
            if len(prefix) + 2 + i + 1 > room:
                break
            best = i
    if not best:
        return None
    first, rest = body[:best + 1], body[best + 1:]
    return f"{prefix}{quote}{first}{quote}", f"{prefix}{quote}{rest}{quote}"


def fit_long_lines(code: str) -> str:
    """``code`` with long comments wrapped and long bracketed strings split (see above);
    ``code`` itself when it does not parse or the result would parse differently."""
    try:
        before = ast.dump(ast.parse(code))
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (SyntaxError, tokenize.TokenError, IndentationError):
        return code
    depth, by_row = 0, {}
    for tok in tokens:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        by_row.setdefault(tok.start[0], []).append((tok, depth))
    out = []
    for row, line in enumerate(code.split("\n"), start=1):
        indent = line[:len(line) - len(line.lstrip())]
        toks = [(t, d) for t, d in by_row.get(row, []) if t.type not in (
            tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
        if len(line) <= LINE_LENGTH or not toks:
            out.append(line)
            continue
        first, last = toks[0][0], toks[-1][0]
        if last.type == tokenize.COMMENT:
            text = last.string.lstrip("#").strip()
            if first is last:
                out += _wrap_comment(text, indent)
                continue
            out += _wrap_comment(text, indent)
            line = line[:last.start[1]].rstrip()
            if len(line) <= LINE_LENGTH:
                out.append(line)
                continue
        if first.type == tokenize.STRING and toks[0][1] > 0 and first.start[0] == first.end[0]:
            while len(line) > LINE_LENGTH:
                token = re.match(r"\s*([rRbBuUfF]*(['\"]).*?(?<!\\)\2)", line).group(1)
                parts = _split_string(token, LINE_LENGTH - len(indent))
                if parts is None:
                    break
                out.append(indent + parts[0])
                line = indent + parts[1] + line[len(indent) + len(token):]
        out.append(line)
    fitted = "\n".join(out)
    try:
        return fitted if ast.dump(ast.parse(fitted)) == before else code
    except SyntaxError:
        return code


def _ruff(codes: list[str | None]) -> list[str | None]:
    """Each of ``codes`` formatted by ruff (one call for all), None where it cannot parse."""
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / f"cell_{i:04d}.py" for i in range(len(codes))]
        for path, code in zip(files, codes):
            path.write_text(code or "", encoding="utf-8")
        proc = subprocess.run([*RUFF, tmp], capture_output=True, text=True)
        failed = set(re.findall(r"cell_\d{4}\.py", proc.stderr))
        return [None if f.name in failed or code is None else f.read_text(encoding="utf-8")
                for f, code in zip(files, codes)]


def format_codes(codes: list[str]) -> list[str | None]:
    """Each of ``codes`` formatted: long lines fitted (a trailing comment moves above its
    line before ruff splits the code around it), ruff, long lines fitted again, and ruff
    again (which may rejoin what now fits). None where ruff cannot parse the code."""
    first = _ruff([fit_long_lines(code) for code in codes])
    return _ruff([fit_long_lines(code) if code is not None else None for code in first])


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
