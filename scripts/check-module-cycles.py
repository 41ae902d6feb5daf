#!/usr/bin/env python3
"""No two modules of a crate import each other, directly or round a longer circle (issue 31).

Usage: check-module-cycles.py CRATE_DIR...   (exit 1 when a circle is found)
       check-module-cycles.py --self-test     (checks this script on trees with known verdicts)

For each crate directory, the graph is made of the crate's top-level modules (`src/foo.rs`,
`src/foo/mod.rs` and every file under `src/foo/` are module `foo`; `src/bin/` is other
crates), an edge `a -> b` for every reference from a file of `a` to `b`: `use crate::b::…`,
`use crate::{b::X, c::Y}` (groups, nested, over several lines, `pub use` too),
`use super::b::…`, `self::`, and paths in code such as `crate::b::f()`. A path to an item of
the crate root (`crate::X`) counts as a reference to the module the root re-exports `X` from
(`pub use b::X;` in lib.rs or main.rs). One level deeper, the submodules of each module
directory (`src/foo/bar.rs`, `src/foo/bar/…`) form a graph of their own; a reference to the
directory's own `mod.rs` (the parent) is no edge.

Test code is left out: files named `tests.rs` or `*_tests.rs`, modules and items under
`#[cfg(test)]` (inline, or `mod x;` whose file is then skipped). Comments and string literals
are not code. Strongly connected components are found with Tarjan's algorithm; each one
prints as `crate: a -> b -> a (a.rs:LINE uses b; b.rs:LINE uses a)` (paths relative to
`src/`), with one circle per pair of modules that import each other and a shortest circle
through every other module of the component.

Python 3 standard library only.
"""

import os
import re
import subprocess
import sys
import tempfile

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


# ---------------------------------------------------------------------------------------------
# Lexing: code without comments and literals, lines kept.


def strip_code(text):
    """`text` with comments, string and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)

    def blank(s):
        return "".join("\n" if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif c in "rb" and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
            # Raw strings r"…", r#"…"#, br"…"; byte strings b"…"; byte chars b'…'.
            m = re.compile(r'(b?r)(#*)"').match(text, i)
            if m:
                end = text.find('"' + m.group(2), m.end())
                end = n if end < 0 else end + 1 + len(m.group(2))
                out.append(blank(text[i:end]))
                i = end
            elif c == "b" and nxt in "\"'":
                out.append(" ")
                i += 1
            else:
                out.append(c)
                i += 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i : j + 1]))
            i = j + 1
        elif c == "'":
            # A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            if nxt == "\\":
                j = text.find("'", i + 2)
                j = n - 1 if j < 0 else j
                out.append(blank(text[i : j + 1]))
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'":
                out.append("   ")
                i += 3
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def skip_item(code, i):
    """The index just past the item starting at `i` (attributes included): its `;` or its
    balanced `{…}` block, whichever comes first at depth 0."""
    n = len(code)
    # Further attributes of the same item.
    while True:
        m = re.compile(r"\s*#\s*\[").match(code, i)
        if not m:
            break
        i = match_bracket(code, m.end() - 1, "[", "]")
    depth = 0
    while i < n:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "{":
            return match_bracket(code, i, "{", "}")
        elif c == ";" and depth <= 0:
            return i + 1
        i += 1
    return n


def match_bracket(code, i, open_, close):
    """The index just past the bracket that closes the one at `i`."""
    depth, n = 0, len(code)
    while i < n:
        if code[i] == open_:
            depth += 1
        elif code[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


TEST_CFG = re.compile(r"#\s*\[\s*cfg\s*\(\s*(?:test|all\s*\(\s*test\b[^\]]*\))\s*\)\s*\]")


def without_tests(code):
    """`code` with every item under `#[cfg(test)]` (or `cfg(all(test, …))`) blanked; also the
    names of `mod x;` declarations so removed (their files are test files)."""
    test_mods = []
    while True:
        m = TEST_CFG.search(code)
        if not m:
            return code, test_mods
        end = skip_item(code, m.end())
        item = code[m.start() : end]
        d = re.search(r"\bmod\s+(" + IDENT + r")\s*;", item)
        if d:
            test_mods.append(d.group(1))
        code = code[: m.start()] + "".join("\n" if c == "\n" else " " for c in item) + code[end:]


# ---------------------------------------------------------------------------------------------
# Paths in code.


def expand_use_tree(tree):
    """The paths a use tree names: `crate::{a::X, b::{Y, Z}}` → [[crate,a,X], [crate,b,Y], …]."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)  # `X as Y`: the path is X's
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        if not s:
            return
        parts = split_top(s)
        if len(parts) > 1:
            for p in parts:
                walk(prefix, p)
            return
        s = parts[0]
        b = s.find("{")
        if b >= 0:
            head = s[:b].rstrip(":")
            inner = s[b + 1 : match_bracket(s, b, "{", "}") - 1]
            walk(prefix + [x for x in head.split("::") if x], inner)
        else:
            out.append(prefix + [x for x in s.split("::") if x])

    walk([], tree)
    return out


def split_top(s):
    parts, depth, start = [], 0, 0
    for i, c in enumerate(s):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return [p for p in parts if p]


USE = re.compile(r"(?<![A-Za-z0-9_])use\s+([^;]*);")
PATH = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:\s*::\s*" + IDENT + r")+)")


def references(code):
    """(line, path segments) of every `use` path and in-code path that starts at `crate`,
    `super` or `self`."""
    refs = []
    spans = []
    for m in USE.finditer(code):
        line = code.count("\n", 0, m.start()) + 1
        for p in expand_use_tree(m.group(1)):
            if p and p[0] in ("crate", "super", "self"):
                refs.append((line, p))
        spans.append((m.start(), m.end()))
    for m in PATH.finditer(code):
        if any(a <= m.start() < b for a, b in spans):
            continue
        line = code.count("\n", 0, m.start()) + 1
        refs.append((line, [x for x in re.split(r"\s*::\s*", m.group(1)) if x]))
    return refs


def absolute(path, module):
    """`path` (from `crate`, `super` or `self`) made absolute from module `module` (a list)."""
    if path[0] == "crate":
        return path[1:]
    base = list(module)
    rest = list(path)
    if rest[0] == "self":
        rest = rest[1:]
    while rest and rest[0] == "super":
        base = base[:-1]
        rest = rest[1:]
    return base + rest


# ---------------------------------------------------------------------------------------------
# A crate.


def is_test_file(name):
    return name == "tests.rs" or name.endswith("_tests.rs")


def module_of(rel):
    """Module path of a file relative to src/: a/b.rs → [a, b]; a/mod.rs → [a]."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return parts


def crate_files(src):
    """(relative path, module path) of the crate's non-test files, `src/bin` and test
    modules left out."""
    files = []
    skipped = set()
    for root, dirs, names in os.walk(src):
        dirs.sort()
        rel_root = os.path.relpath(root, src)
        if rel_root == "bin" or rel_root.startswith("bin" + os.sep):
            continue
        for name in sorted(names):
            if not name.endswith(".rs") or is_test_file(name):
                continue
            rel = os.path.normpath(os.path.join(rel_root, name))
            files.append(rel)
    # Files declared `#[cfg(test)] mod x;` are test files too.
    texts = {}
    for rel in files:
        with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as f:
            code, test_mods = without_tests(strip_code(f.read()))
        texts[rel] = code
        here = module_of(rel)
        if rel in ("lib.rs", "main.rs"):
            here = []
        for t in test_mods:
            skipped.add(tuple(here + [t]))
    out = []
    for rel in files:
        m = [] if rel in ("lib.rs", "main.rs") else module_of(rel)
        if any(tuple(m[: len(s)]) == s for s in skipped):
            continue
        out.append((rel, m, texts[rel]))
    return out


def reexports(code, module):
    """Names a module file imports or re-exports (`use`, `pub use`: its children see both)
    and the first segment of where each comes from: {name: segment}."""
    out = {}
    for m in USE.finditer(code):
        for p in expand_use_tree(m.group(1)):
            if not p:
                continue
            a = absolute(p, module) if p[0] in ("crate", "super", "self") else module + p
            if a[: len(module)] == module and len(a) >= len(module) + 2:
                out.setdefault(a[-1], a[len(module)])
    return out


def graphs(crate_dir):
    """{graph name: (nodes, {(a, b): (file, line)})} for the crate's top level and each
    module directory."""
    src = os.path.join(crate_dir, "src")
    files = crate_files(src)
    top = sorted({m[0] for _, m, _ in files if m})
    dirs = {}  # module dir name → its submodules
    for _, m, _ in files:
        if len(m) >= 2:
            dirs.setdefault(m[0], set()).add(m[1])
    root_exports = {}
    dir_exports = {d: {} for d in dirs}
    for rel, m, code in files:
        if m == []:
            root_exports.update(reexports(code, []))
        elif len(m) == 1 and m[0] in dirs:
            dir_exports[m[0]].update(reexports(code, m))
    out = {"": (top, {})}
    for d in sorted(dirs):
        out[d] = (sorted(dirs[d]), {})
    for rel, m, code in files:
        if not m:
            continue
        for line, p in references(code):
            a = absolute(p, m)
            if not a:
                continue
            target = a[0] if a[0] in top else root_exports.get(a[0])
            if target in top and target != m[0]:
                out[""][1].setdefault((m[0], target), (rel, line))
            # One level deeper: siblings inside module directory m[0].
            if len(m) >= 2 and m[0] in dirs and len(a) >= 2 and a[0] == m[0]:
                sub = a[1] if a[1] in dirs[m[0]] else dir_exports[m[0]].get(a[1])
                if sub in dirs[m[0]] and sub != m[1]:
                    out[m[0]][1].setdefault((m[1], sub), (rel, line))
    return out


# ---------------------------------------------------------------------------------------------
# Circles.


def tarjan(nodes, edges):
    """Strongly connected components of more than one node, each sorted."""
    succ = {v: sorted(b for (a, b) in edges if a == v) for v in nodes}
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        # Iterative, so a deep graph cannot overflow Python's stack.
        work = [(v, 0)]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            v, i = work[-1]
            if i < len(succ[v]):
                work[-1] = (v, i + 1)
                w = succ[v][i]
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return sorted(comps)


def shortest_cycle(start, comp, edges):
    """The shortest circle from `start` back to it inside `comp` (a list of nodes)."""
    inside = set(comp)
    prev = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for (a, b) in sorted(edges):
                if a != v or b not in inside:
                    continue
                if b == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if b not in prev:
                    prev[b] = v
                    nxt.append(b)
        frontier = nxt
    return None


def circles(nodes, edges):
    """Circles to print: for each component, every mutual pair, then a shortest circle
    through each module no printed circle passes through."""
    out = []
    for comp in tarjan(nodes, edges):
        covered = set()
        for a in comp:
            for b in comp:
                if a < b and (a, b) in edges and (b, a) in edges:
                    out.append([a, b, a])
                    covered.update((a, b))
        for v in comp:
            if v not in covered:
                c = shortest_cycle(v, comp, edges)
                if c:
                    out.append(c)
                    covered.update(c)
    return out


def describe(crate, graph, cycle, edges):
    prefix = crate if not graph else f"{crate} ({graph}/)"
    why = "; ".join(
        f"{edges[(a, b)][0]}:{edges[(a, b)][1]} uses {b}" for a, b in zip(cycle, cycle[1:])
    )
    return f"{prefix}: {' -> '.join(cycle)} ({why})"


def check(crate_dirs, out=sys.stdout):
    """Prints every circle of every crate; the number of circles."""
    found = 0
    for crate_dir in crate_dirs:
        crate = os.path.basename(os.path.normpath(crate_dir))
        if not os.path.isdir(os.path.join(crate_dir, "src")):
            print(f"{crate}: no src directory in {crate_dir}", file=out)
            found += 1
            continue
        for graph, (nodes, edges) in sorted(graphs(crate_dir).items()):
            for c in circles(nodes, edges):
                print(describe(crate, graph, c, edges), file=out)
                found += 1
    return found


# ---------------------------------------------------------------------------------------------
# Self-test.


def write_tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


CLEAN = {
    "src/lib.rs": "mod a;\nmod b;\nmod c;\nmod d;\npub use b::Beta;\n#[cfg(test)]\nmod checks;\n",
    # A group over several lines, a nested group and a `pub use`.
    "src/a.rs": (
        "use crate::{\n    b::Beta,\n    c::{self, Gamma},\n};\npub use crate::d::Delta;\n"
        "/// Not code: crate::c::x and `use crate::c;`\npub fn f() { let _ = \"crate::c::y\"; }\n"
        "fn g<'a>(x: &'a str) -> char { let _ = crate::c::h(); 'c' }\n"
    ),
    "src/b.rs": "pub struct Beta;\npub fn k() -> char { '\\'' }\n",
    "src/c.rs": (
        "pub struct Gamma;\npub fn h() {}\n"
        "#[cfg(test)]\nmod tests {\n    use crate::a::f;\n    use super::super::a;\n}\n"
        "#[cfg(test)]\nuse crate::a::g;\n"
    ),
    # Test files and test modules may use anything.
    "src/c_tests.rs": "use crate::a::f;\n",
    "src/checks.rs": "use crate::a::f;\n",
    "src/d/mod.rs": "mod x;\nmod y;\npub use x::Delta;\n",
    "src/d/x.rs": "use super::y::Why;\npub struct Delta;\n",
    "src/d/y.rs": "pub struct Why;\n/* use super::x::Delta; /* nested */ still a comment */\n",
    "src/d/tests.rs": "use super::x::Delta;\n",
    "src/bin/tool.rs": "use crate::a::f;\n",
}

CIRCLES = {
    # b -> a through a root re-export (`crate::Alpha`), a -> b as in the clean tree.
    "src/lib.rs": CLEAN["src/lib.rs"] + "pub use a::Alpha;\n",
    "src/a.rs": CLEAN["src/a.rs"] + "pub struct Alpha;\n",
    "src/b.rs": "pub struct Beta;\npub fn k() -> crate::Alpha { crate::Alpha }\n",
    # c -> d -> c: a longer circle with a (d -> a below): a -> d? a uses d (pub use).
    "src/c.rs": "pub struct Gamma;\npub fn h() {}\nuse crate::d::Delta as _;\n",
    # Siblings y -> x (through mod.rs' re-export) and x -> y.
    "src/d/y.rs": "pub struct Why;\npub use\n    super::Delta;\n",
    "src/d/x.rs": "use super::y::Why;\npub struct Delta;\npub fn e() { super::super::c::h() }\n",
}

EXPECTED_CIRCLES = [
    "t: a -> b -> a (a.rs:1 uses b; b.rs:2 uses a)",
    "t: c -> d -> c (c.rs:3 uses d; d/x.rs:3 uses c)",
    "t (d/): x -> y -> x (d/x.rs:1 uses y; d/y.rs:2 uses x)",
]


def self_test():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean", "t")
        write_tree(clean, CLEAN)
        circ = os.path.join(tmp, "circles", "t")
        write_tree(circ, {**CLEAN, **CIRCLES})
        for name, crate, want_rc, want in [
            ("clean tree", clean, 0, []),
            ("tree with circles", circ, 1, EXPECTED_CIRCLES),
        ]:
            r = subprocess.run(
                [sys.executable, os.path.abspath(__file__), crate],
                capture_output=True,
                text=True,
            )
            got = r.stdout.splitlines()
            if r.returncode != want_rc or got != want or r.stderr:
                failures.append(
                    f"{name}: exit {r.returncode} (want {want_rc})\n  got:  {got}\n"
                    f"  want: {want}\n  stderr: {r.stderr.strip()}"
                )
    if failures:
        print("check-module-cycles self-test FAILED:\n" + "\n".join(failures))
        return 1
    print("check-module-cycles self-test: ok (a clean tree passes; known circles are found)")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if not argv or any(a.startswith("-") for a in argv):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    found = check(argv)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
