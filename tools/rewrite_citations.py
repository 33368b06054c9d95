"""Rewrite the spec-file citations in dpfast's sources into citations of the documentation.

The mapping is docs/_citations.md (spec file, and for lectures.md the section letter, to a docs
page).  In docstrings a citation becomes ``:doc:`/theory/<page>``` (a link in the HTML, readable
in help()); in comments and string literals that are not docstrings (error messages) it becomes
``docs/theory/<page>.rst``.  Citations of ``lectures.md`` section H and of ``architecture.md``
point at tests and developer text, not at user documentation: they are dropped from docstrings
and reported.

    python tools/rewrite_citations.py            # dry run: prints each change and what is left
    python tools/rewrite_citations.py --write    # apply
    python tools/rewrite_citations.py --check    # exit 1 if any spec citation is left

Only the citation tokens are replaced; the words around them (theorem numbers, section names)
stay, so read the dry run once before --write.
"""
import argparse
import ast
import difflib
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FILE_PAGE = {
    "mechanisms": "theory/mechanisms",
    "accounting": "theory/accounting",
    "objective_perturbation": "theory/erm",
    "public_data": "theory/public_data",
}
LECTURE_PAGE = {"A": "theory/conventions", "B": "theory/mechanisms", "C": "theory/erm",
                "D": "theory/accounting", "E": "theory/mechanisms"}
# sections of mechanisms.md that live on another page
MECH_SECTION_PAGE = [(re.compile(r"^\W*(DP-SGD|ERM mechanisms|ghost)", re.I), "theory/erm"),
                     (re.compile(r"^\W*(Conventions|Randomness)", re.I), "theory/conventions")]
OP_SECTION_PAGE = [(re.compile(r"^\W*(\"?Experiments|\"?honest)", re.I), None)]

# lectures.md's lettered sections (B2-B4, C1a) and public_data.md's numbered ones (3.4): dropped
# with the file name, since the docs pages are organised differently
SEC = r"(?:[A-H]\d+(?:\.\d+)*[a-z]?(?:\s*(?:[-/,]|and)\s*[A-H]?\d+(?:\.\d+)*[a-z]?)*|\d\.\d+\b)"
CITE = re.compile(
    r"(?:(?P<lead>\b[Ss]pec(?:ification)?\b:?)(?P<ws>\s*))?"
    r"(?:``|`)?(?:\.\./shared/spec/|spec/)?(?P<file>mechanisms|accounting|objective_perturbation|public_data|lectures|architecture)\.md(?:``|`)?"
    r"(?P<sec>\s+" + SEC + r")?"
)
# "spec 2.4", "spec 4.3" (public_data.md's numbered sections, cited without the file name)
BARE = re.compile(r"\bspec\s+(?P<num>\d\.\d+)")


def _page(m, after):
    f = m.group("file")
    if f == "lectures":
        sec = (m.group("sec") or "").strip()
        return LECTURE_PAGE.get(sec[:1]) if sec else "theory/index"
    if f == "architecture":
        return None
    if f == "mechanisms":
        for pat, page in MECH_SECTION_PAGE:
            if pat.search(after):
                return page
    return FILE_PAGE[f]


def _replace(text, docstring, notes):
    def sub(m):
        after = text[m.end():m.end() + 40]
        page = _page(m, after)
        if page is None:
            notes.append(f"dropped (no user page): {m.group(0)!r}")
            return "the developer notes" if not docstring else "dpfast's design notes"
        ref = f":doc:`/{page}`" if docstring else f"docs/{page}.rst"
        if m.group("lead"):  # "Spec: x.md" -> "See: <page>"; the whitespace (a newline) is kept
            ref = ("See" if m.group("lead")[0] == "S" else "see") + (":" if m.group("lead").endswith(":") else "") \
                + (m.group("ws") or " ") + ref
        return ref

    text = CITE.sub(sub, text)
    text = BARE.sub(lambda m: ":doc:`/theory/public_data`" if docstring else "docs/theory/public_data.rst", text)
    return text


def _docstring_spans(source):
    """(start, end) character offsets of every docstring in ``source``."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                e = body[0].value
                spans.append((offsets[e.lineno - 1] + e.col_offset, offsets[e.end_lineno - 1] + e.end_col_offset))
    return spans


def rewrite_python(source, notes):
    spans = _docstring_spans(source)
    out, pos = [], 0
    for start, end in sorted(spans):
        out.append(_replace(source[pos:start], False, notes))
        out.append(_replace(source[start:end], True, notes))
        pos = end
    out.append(_replace(source[pos:], False, notes))
    return "".join(out)


def rewrite_other(source, notes):  # .pyx: no ast; treat everything as comments/messages
    return _replace(source, False, notes)


def files():
    pats = ["dpfast/**/*.py", "dpfast/**/*.pyx"]
    return sorted({p for pat in pats for p in glob.glob(os.path.join(ROOT, pat), recursive=True)})


def left(source):
    return [m.group(0) for m in CITE.finditer(source)] + [m.group(0) for m in BARE.finditer(source)]


# mentions the table cannot map mechanically (no file name): listed by --check for a hand edit
RESIDUAL = re.compile(r"\blectures\s+[A-H]\d[\w.-]*|\bthe spec\b|spec/sources|\[MINE\]|\bspec\s+\d\.\d")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    total, remaining = 0, 0
    for path in files():
        src = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, ROOT)
        if args.check:
            found = left(src)
            remaining += len(found)
            for f in found:
                print(f"{rel}: {f}")
            continue
        notes = []
        new = (rewrite_python if path.endswith(".py") else rewrite_other)(src, notes)
        if new == src:
            continue
        if path.endswith(".py"):
            ast.parse(new)  # never write a file that no longer parses
        diff = [d for d in difflib.unified_diff(src.splitlines(), new.splitlines(), rel, rel, n=0, lineterm="")
                if d[:1] in "-+" and not d.startswith(("---", "+++"))]
        n = sum(1 for d in diff if d.startswith("-"))
        total += n
        print(f"{rel}: {n} line(s)")
        for d in diff:
            print("  " + d)
        for note in notes:
            print(f"  ! {note}")
        if args.write:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    if args.check:
        for path in files():
            for i, line in enumerate(open(path, encoding="utf-8"), 1):
                if RESIDUAL.search(line):
                    print(f"  hand edit? {os.path.relpath(path, ROOT)}:{i}: {line.strip()[:110]}")
        print(f"{remaining} spec citation(s) left")
        return 1 if remaining else 0
    print(f"{total} line(s) {'rewritten' if args.write else 'would change'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
