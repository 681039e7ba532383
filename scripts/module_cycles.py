#!/usr/bin/env python3
"""Import cycles between the folders of each crate (scripts/check-deps.sh runs this).

Two levels are checked in every crate's src/:
  - its top-level modules (`core/src/msg`, `core/src/meta.rs` ...): an edge a -> b when a file
    of module a names `crate::b`;
  - the children of each top-level folder (`core/src/meta/request.rs` and `.../ops.rs`): an
    edge when a file of child a names `super::b` or `crate::<folder>::b` (files deeper down
    count for the child they sit under).
Every strongly connected component of more than one module is a cycle. Today's cycles are
listed in scripts/known-cycles.txt, one per line as `crate: level: a b c` (sorted names); a
cycle that is not listed, or that grew, fails; a listed cycle that is gone fails too, so that
the list is kept true and can only shrink.

Not parsed: paths in comments (doc links are not dependencies), macros that build paths,
`use` of a crate's own name (`t3fs_core::` from inside t3fs-core). Good enough for a ratchet;
not a compiler.

  python3 scripts/module_cycles.py            # check the workspace
  python3 scripts/module_cycles.py --self-test  # show that a planted cycle is caught
"""
import os
import re
import sys
import tempfile

CRATES = {"core": "core/src", "sim": "sim/src", "services": "services/src", "client": "client/src",
          "real": "real/src", "crosscheck": "crosscheck/src", "scenario": "scenarios/src", "reports": "reports/src", "cli": "src"}
KNOWN = "scripts/known-cycles.txt"
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_test_items(code):
    """`code` without the items under `#[cfg(test)]` (a `mod tests { ... }`, a `mod x;`, a
    `use ...;`, a function): test code may reach anywhere, and counting it would merge modules
    into cycles that production code does not have."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        if m.start() < i:
            continue
        out.append(code[i:m.start()])
        j = m.end()
        while True:  # Further attributes on the same item.
            a = re.match(r"\s*#\[[^\]]*\]", code[j:])
            if not a:
                break
            j += a.end()
        depth, k = 0, j
        while k < len(code):
            c = code[k]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    k += 1
                    break
            elif c == ";" and depth == 0:
                k += 1
                break
            k += 1
        i = k
    out.append(code[i:])
    return "".join(out)


def code_of(path):
    """The file's production text: no comments, no string literals, no `#[cfg(test)]` items."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text, flags=re.S)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = "\n".join(line.split("//", 1)[0] for line in text.splitlines())
    return strip_test_items(text)


def is_test_file(path):
    """Files that hold only tests (`tests.rs`, `*_tests.rs`, `*_test.rs`, a `tests/` folder, and
    anything in the folder of such a file: `msg/codec_test/pages.rs` is a child of a test)."""
    name = os.path.basename(path)
    parts = path.replace(os.sep, "/").split("/")
    folders = parts[:-1]
    return (name in ("tests.rs",) or name.endswith(("_tests.rs", "_test.rs"))
            or "tests" in folders or any(f.endswith(("_tests", "_test")) for f in folders))


def module_path(src, path):
    """The module path of `path` under the crate root `src` (`meta/request.rs` -> meta,
    request; `meta/mod.rs` -> meta; `lib.rs` -> nothing)."""
    rel = os.path.relpath(path, src).replace(os.sep, "/")[:-3].split("/")
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


PATH_START = r"\b((?:crate|self|super)(?:::super)*)::"


def group_items(text):
    """The top-level items of a `{...}` group at the start of `text`, and the group's length."""
    depth, i, items, item = 1, 1, [], ""
    while i < len(text) and depth > 0:
        c = text[i]
        depth += (c == "{") - (c == "}")
        if depth == 1 and c == ",":
            items.append(item)
            item = ""
        elif depth >= 1:
            item += c
        i += 1
    items.append(item)
    return items


def path_heads(text, want=2):
    """The paths (up to `want` segments) that `text` starts with: `a::b`, `a::{b, c::d}`,
    `{a, b::c}`, each group expanded."""
    text = text.lstrip()
    if text.startswith("{"):
        out = []
        for item in group_items(text):
            out += path_heads(item, want)
        return out
    seg = re.match(IDENT, text)
    if not seg or seg.group(0) in ("self", "super", "crate"):
        return []
    name, rest = seg.group(0), text[seg.end():]
    if want == 1 or not rest.startswith("::"):
        return [[name]]
    tails = path_heads(rest[2:], want - 1)
    return [[name] + t for t in tails] or [[name]]


def targets(code, here):
    """Absolute module paths (first two segments) that `code`, in module `here`, names through
    `crate::`, `self::` or `super::` paths, groups expanded."""
    found = []
    for m in re.finditer(PATH_START, code):
        head = m.group(1).split("::")
        if head[0] == "crate":
            base = []
        elif head[0] == "self":
            base = list(here)
        else:
            base = list(here)[: max(0, len(here) - head.count("super"))]
        for names in path_heads(code[m.end():]):
            found.append(tuple((base + names)[:2]))
    return found


def modules_of(folder):
    """The modules directly in `folder`: name -> list of its production .rs files."""
    mods = {}
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry)
        if entry.endswith(".rs") and entry not in ("lib.rs", "main.rs", "mod.rs"):
            if not is_test_file(path):
                mods.setdefault(entry[:-3], []).append(path)
        elif os.path.isdir(path):
            files = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".rs")]
            mods.setdefault(entry, []).extend(f for f in files if not is_test_file(f))
    return mods


def edges(mods, refs):
    """Edges between `mods` given `refs(file) -> names it references`."""
    graph = {m: set() for m in mods}
    for m, files in mods.items():
        for f in files:
            graph[m] |= {n for n in refs(f) if n in mods and n != m}
    return graph


def sccs(graph):
    """Tarjan's strongly connected components of more than one node, each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def cycles(root, crates):
    """Every cycle in the workspace at `root`: lines `crate: level: a b c`."""
    found = []
    for crate, src in crates.items():
        folder = os.path.join(root, src)
        if not os.path.isdir(folder):
            continue
        top = modules_of(folder)

        def named(f):
            return targets(code_of(f), module_path(folder, f))

        graph = edges(top, lambda f: {t[0] for t in named(f)})
        found += [f"{crate}: top: {' '.join(c)}" for c in sccs(graph)]
        for name in sorted(top):
            sub = os.path.join(folder, name)
            if not os.path.isdir(sub):
                continue
            kids = modules_of(sub)

            def refs(f, name=name):
                return {t[1] for t in named(f) if len(t) == 2 and t[0] == name}

            found += [f"{crate}: {name}: {' '.join(c)}" for c in sccs(edges(kids, refs))]
    return sorted(found)


def check(root):
    known_path = os.path.join(root, KNOWN)
    known = set()
    if os.path.exists(known_path):
        for line in open(known_path, encoding="utf-8"):
            line = line.split("#", 1)[0].strip()
            if line:
                known.add(line)
    found = cycles(root, CRATES)
    fail = False
    for c in found:
        if c not in known:
            print(f"rule broken: import cycle {c} (not in {KNOWN}: untangle it)")
            fail = True
    for c in sorted(known - set(found)):
        print(f"cycle gone: {c} (remove it from {KNOWN})")
        fail = True
    if not fail:
        print(f"no new import cycle between folders ({len(found)} known, listed in {KNOWN})")
    return 1 if fail else 0


def self_test():
    """A planted cycle is found, and a tree without one passes."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "c", "src")
        os.makedirs(os.path.join(src, "a"))
        open(os.path.join(src, "lib.rs"), "w").write("pub mod a;\npub mod b;\n")
        open(os.path.join(src, "a", "mod.rs"), "w").write("mod x;\nmod y;\n")
        open(os.path.join(src, "a", "x.rs"), "w").write("use super::y::Y;\n")
        open(os.path.join(src, "a", "y.rs"), "w").write("// use super::x; (a comment)\n")
        open(os.path.join(src, "b.rs"), "w").write("use crate::{a::x, c};\n")
        # Test-only references make no edge, also after a string continued over a line end
        # (a backslash before the newline once unpaired the quotes and exposed the tests).
        open(os.path.join(src, "a", "x.rs"), "w").write(
            "use super::y::Y;\nconst S: &str = \"one \\\n  two\";\nconst U: &str = \"u\";\n"
            "#[cfg(test)]\n#[doc = \"x\"]\nmod tests { use crate::b; }\n")
        assert cycles(d, {"c": "c/src"}) == [], cycles(d, {"c": "c/src"})
        # Plant two: a -> b at the top, y -> x inside a.
        open(os.path.join(src, "a", "y.rs"), "w").write("use super::super::b;\nuse crate::a::{x::X};\n")
        got = cycles(d, {"c": "c/src"})
        assert got == ["c: a: x y", "c: top: a b"], got
    print("self-test: planted cycles found (c: top: a b, c: a: x y); a tree without one passes")
    return 0


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if "--self-test" in sys.argv:
        sys.exit(self_test())
    if "--list" in sys.argv:
        print("\n".join(cycles(os.path.dirname(here), CRATES)))
        sys.exit(0)
    sys.exit(check(os.path.dirname(here)))
