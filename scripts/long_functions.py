#!/usr/bin/env python3
"""Functions longer than 80 lines in production code (scripts/check-deps.sh runs this).

A function's length is counted from the line of its `fn` to the line of its closing brace.
Test code is not counted: files under a `tests/` folder or named `tests.rs`, `*_tests.rs`,
`*_test.rs`, and items under `#[cfg(test)]` (the same stripping as module_cycles.py).
The functions that stay long are listed in scripts/long-functions.txt, one per line as
`path::name`, each with the reason it stays after a `#`; the list holds at most 10. A long
function that is not listed fails, and so does a listed one that is gone or got short, so the
list stays true.

Not parsed: braces inside string or char literals and comments are skipped by a small lexer;
macros that define functions are not seen. Good enough for a ratchet; not a compiler.

  python3 scripts/long_functions.py            # check the workspace
  python3 scripts/long_functions.py --list     # every function over the limit, longest first
  python3 scripts/long_functions.py --self-test  # show that a planted long function is caught
"""
import os
import re
import sys
import tempfile

from module_cycles import strip_test_items

ROOTS = ["core/src", "sim/src", "services/src", "client/src", "real/src", "crosscheck/src", "scenarios/src",
         "reports/src", "src"]
KNOWN = "scripts/long-functions.txt"
LIMIT = 80
ALLOWED = 10
FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def blank_literals(code):
    """`code` with comments, strings and char literals replaced by spaces (newlines kept), so
    that braces inside them do not count."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", code[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', code[i:]) and not re.match(r"[A-Za-z0-9_]", code[i - 1:i] or " "):
            hashes = re.match(r"r(#*)\"", code[i:]).group(1)
            end = '"' + hashes
            j = code.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", code[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and code[j] != '"':
                j += 2 if code[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", code[i:j + 1]))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", code[i:]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", code[i:])
            out.append(" " * m.end())
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(code):
    """(name, first line, lines) of every function with a body in `code`."""
    found = []
    for m in FN.finditer(code):
        # The body starts at the first `{` after the signature; a `;` first means no body.
        j = m.end()
        depth_paren = 0
        while j < len(code):
            c = code[j]
            if code.startswith("->", j):
                j += 2
                continue
            if c in "([<":
                depth_paren += 1
            elif c in ")]>":
                depth_paren -= 1
            elif c == ";" and depth_paren <= 0:
                j = -1
                break
            elif c == "{" and depth_paren <= 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        depth, k = 0, j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, k) + 1
        found.append((m.group(1), first, last - first + 1))
    return found


def is_test_file(path):
    parts = path.split(os.sep)
    name = parts[-1]
    return ("tests" in parts[:-1] or name == "tests.rs" or name.endswith("_tests.rs")
            or name.endswith("_test.rs"))


def long_functions(root="."):
    """{path::name: lines} of every production function over LIMIT lines under `root`."""
    out = {}
    for base in ROOTS:
        for d, _, files in os.walk(os.path.join(root, base)):
            for f in sorted(files):
                path = os.path.relpath(os.path.join(d, f), root)
                if not f.endswith(".rs") or is_test_file(path):
                    continue
                with open(os.path.join(root, path), encoding="utf-8") as fh:
                    code = blank_literals(fh.read())
                # Keep line numbers: test items become blank lines, not nothing.
                kept = strip_test_items(code)
                for name, _, lines in functions(kept):
                    if lines > LIMIT:
                        out[f"{path}::{name}"] = max(lines, out.get(f"{path}::{name}", 0))
    return out


def known(root="."):
    entries = {}
    with open(os.path.join(root, KNOWN), encoding="utf-8") as fh:
        for line in fh:
            body, _, why = line.partition("#")
            body = body.strip()
            if body:
                entries[body] = why.strip()
    return entries


def check(root="."):
    found, listed, errors = long_functions(root), known(root), []
    for f, lines in sorted(found.items()):
        if f not in listed:
            errors.append(f"new long function: {f} has {lines} lines (limit {LIMIT}); split it")
    for f, why in listed.items():
        if f not in found:
            errors.append(f"listed in {KNOWN} but not over {LIMIT} lines now: {f}; remove it")
        elif not why:
            errors.append(f"{f} is listed without the reason it stays long")
    if len(listed) > ALLOWED:
        errors.append(f"{KNOWN} lists {len(listed)} functions; at most {ALLOWED} may stay long")
    return errors


def self_test():
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "core/src"))
        os.makedirs(os.path.join(t, "scripts"))
        body = "\n".join(f"    let x{i} = \"{{\"; // }}" for i in range(LIMIT))
        with open(os.path.join(t, "core/src/lib.rs"), "w") as fh:
            fh.write(f"fn short() {{}}\nfn long() {{\n{body}\n}}\n"
                     f"#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}\n    }}\n}}\n")
        with open(os.path.join(t, KNOWN), "w") as fh:
            fh.write("")
        errors = check(t)
        if len(errors) != 1 or "core/src/lib.rs::long has 82 lines" not in errors[0]:
            print(f"self-test FAILED: a planted long function gave {errors}")
            return False
        with open(os.path.join(t, KNOWN), "w") as fh:
            fh.write("core/src/lib.rs::long  # planted\n")
        if check(t):
            print(f"self-test FAILED: a listed long function gave {check(t)}")
            return False
    print("self-test: a planted long function is caught, a listed one passes, test code is not counted")
    return True


def main():
    if "--self-test" in sys.argv:
        sys.exit(0 if self_test() else 1)
    if "--list" in sys.argv:
        for f, lines in sorted(long_functions().items(), key=lambda kv: -kv[1]):
            print(f"{lines:5}  {f}")
        return
    errors = check()
    for e in errors:
        print(e)
    if errors:
        sys.exit(1)
    print(f"function length: {len(known())} functions over {LIMIT} lines, each listed with its reason")


if __name__ == "__main__":
    main()
