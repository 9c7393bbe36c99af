#!/usr/bin/env python3
"""How much of a store file is SQL: its code lines, and those inside SQL string literals.

    python scripts/sqlshare.py template/_stores/*.py

Code lines are lines that hold a token other than a comment or a docstring; a
SQL line is one covered by a string literal that reads as SQL (it has one of
SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, WITH, FROM, WHERE, SET, AND, OR,
ORDER, LIMIT, RETURNING, VALUES in capitals). issue 26's measure.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize

_SQL = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|WITH|FROM|WHERE|SET|AND|OR|ORDER|LIMIT|"
    r"RETURNING|VALUES|JOIN|UNION|NOT EXISTS|ON CONFLICT|ON DUPLICATE)\b"
)


# Python 3.12 splits an f-string into parts; 3.11 gives it whole, as a STRING.
_STRINGS = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


def docstring_lines(source: str) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return found


def share(path: str) -> tuple[int, int, int]:
    with open(path, encoding="utf-8") as file:
        source = file.read()
    docs = docstring_lines(source)
    code: set[int] = set()
    sql: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in skip or tok.type == tokenize.ENDMARKER:
            continue
        lines = range(tok.start[0], tok.end[0] + 1)
        if tok.start[0] in docs:
            continue
        code.update(lines)
        if tok.type in _STRINGS and _SQL.search(tok.string):
            sql.update(lines)
    return len(source.splitlines()), len(code), len(sql & code)


def main() -> None:
    for path in sys.argv[1:]:
        total, code, sql = share(path)
        print(f"{path}: {total} lines, {code} code, {sql} SQL ({sql / code:.0%} of code)")


if __name__ == "__main__":
    main()
