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

CRATES = {"core": "core/src", "sim": "sim/src", "real": "real/src", "scenario": "scenarios/src",
          "reports": "reports/src", "cli": "src"}
KNOWN = "scripts/known-cycles.txt"
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def code_of(path):
    """The file's text without comments (line comments and block comments)."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def heads(code, prefix):
    """The first path segment after each `prefix::` in `code`, with `prefix::{a, b::c}` read
    as `a` and `b`."""
    names = set(re.findall(re.escape(prefix) + r"::(" + IDENT + r")", code))
    for group in re.finditer(re.escape(prefix) + r"::\{", code):
        depth, i, items, item = 1, group.end(), [], ""
        while i < len(code) and depth > 0:
            c = code[i]
            depth += (c == "{") - (c == "}")
            if depth == 1 and c == ",":
                items.append(item)
                item = ""
            elif depth >= 1:
                item += c
            i += 1
        items.append(item)
        for part in items:
            m = re.match(r"\s*(" + IDENT + r")", part)
            if m:
                names.add(m.group(1))
    return names - {"self", "super", "crate"}


def modules_of(folder):
    """The modules directly in `folder`: name -> list of .rs files belonging to it."""
    mods = {}
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry)
        if entry.endswith(".rs") and entry not in ("lib.rs", "main.rs", "mod.rs"):
            mods.setdefault(entry[:-3], []).append(path)
        elif os.path.isdir(path):
            files = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".rs")]
            mods.setdefault(entry, []).extend(files)
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
        graph = edges(top, lambda f: heads(code_of(f), "crate"))
        found += [f"{crate}: top: {' '.join(c)}" for c in sccs(graph)]
        for name in sorted(top):
            sub = os.path.join(folder, name)
            if not os.path.isdir(sub):
                continue
            kids = modules_of(sub)

            def refs(f, name=name):
                code = code_of(f)
                return heads(code, "super") | heads(code, "crate::" + name)

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
        assert cycles(d, {"c": "c/src"}) == [], cycles(d, {"c": "c/src"})
        # Plant two: a -> b at the top, y -> x inside a.
        open(os.path.join(src, "a", "y.rs"), "w").write("use crate::b;\nuse crate::a::{x::X};\n")
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
