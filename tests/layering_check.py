#!/usr/bin/env python3
"""layering_check: every include and link edge between Lapse's modules is one
that docs/architecture.md's module table allows.

    tests/layering_check.py [--root DIR]      check the tree (exit 1 on a bad edge)
    tests/layering_check.py --self-test       prove the check catches planted edges

The table ("| `folder/` (`target`) | owns | may use |") is the single source of
truth. A module may use what its row lists and, through those, what they may
use (a node including placement/pmap.h uses placement through partition),
except a foreign API that has a sole includer (`the only includer of X` in its
row): no other module may include or link it. Nothing may use node/ or
coordinator/. Test sources (lapse_test() in CMake) and the tests/, bench/ and
chaos-tests/ folders ("anything above") are not checked for edges.

One more rule, textual: the types protoc-c generates (Lapse__*, lapse__*,
LAPSE__*) are named only in the folders that speak the protocol
(PROTO_TYPE_DIRS), in tests/ and in test files; a storage format, the
placement code or the chaos harness that names one depends on the wire
messages (issue 15). Comments count: there is no reason to name one there.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MODULE_DIRS = ["common", "proto", "storage", "placement", "partition", "rpc", "etcd",
               "coordinator", "node", "client", "expr", "dynamodb"]
# Foreign headers and link targets, by the name the table uses.
FOREIGN_INCLUDES = {"rocksdb/": "rocksdb", "nng/": "nng", "curl/": "curl", "jansson.h": "jansson",
                    "xxhash.h": "xxhash", "protobuf-c/": "protobuf-c", "openssl/": "libcrypto"}
LINK_NAMES = {"lapse_common": "common", "lapse_proto": "proto", "lapse_storage": "storage",
              "lapse_placement": "placement", "lapse_partition": "partition",
              "lapse_rpc": "rpc", "lapse_etcd": "etcd", "lapse_expr": "expr", "dep_rocksdb": "rocksdb",
              "lapse_client_shared": "client", "lapse_client_static": "client",
              "dep_nng": "nng", "dep_curl": "curl", "dep_jansson": "jansson",
              "dep_xxhash": "xxhash", "dep_protobufc": "protobuf-c", "dep_crypto": "libcrypto"}
# The folders that may name generated protobuf types (docs/architecture.md,
# "Dependency rules"); every other scanned folder may not, test files aside.
PROTO_TYPE_DIRS = {"rpc", "proto", "node", "coordinator", "client"}
PROTO_TYPE_SCANNED = MODULE_DIRS + ["chaos-tests", "bench"]
PROTO_TYPE = re.compile(r"(?<![A-Za-z0-9_])(Lapse__|lapse__|LAPSE__)")
TEST_FILE = re.compile(r"_test(util)?\.[ch]$")
# How a row names the foreign API it alone includes.
SOLE = {"rocksdb/c.h": "rocksdb", "NNG": "nng", "curl": "curl", "libcrypto": "libcrypto"}


def read_table(root):
    """{module: set(uses)} and {foreign: sole module} from the doc's table."""
    uses, sole = {}, {}
    row = re.compile(r"^\| `([a-z-]+)/`(?: \(`([a-z_]+)`\))? \| (.*) \| (.*) \|$")
    with open(os.path.join(root, "docs/architecture.md")) as f:
        for line in f:
            m = row.match(line.strip())
            if not m or m.group(1) not in MODULE_DIRS:
                continue
            name = m.group(2) or m.group(1)
            uses[name] = {u.strip() for u in m.group(4).split(",") if u.strip()}
            for text, foreign in SOLE.items():
                if "the only includer of `%s`" % text in m.group(3) or \
                        "the only includer of %s" % text in m.group(3):
                    sole[foreign] = name
    return uses, sole


def closure(uses, name):
    seen, todo = set(), [name]
    while todo:
        for u in uses.get(todo.pop(), ()):
            if u not in seen:
                seen.add(u)
                todo.append(u)
    return seen


def cmake_lists(root, dirs=MODULE_DIRS):
    for d in dirs:
        p = os.path.join(root, d, "CMakeLists.txt")
        if os.path.exists(p):
            with open(p) as f:
                # One command per match, comments dropped.
                text = re.sub(r"#[^\n]*", "", f.read())
            yield d, text


def test_sources(root, dirs=MODULE_DIRS):
    """Files (folder/name) that lapse_test() lists: tests and their helpers."""
    out = set()
    for d, text in cmake_lists(root, dirs):
        for m in re.finditer(r"lapse_test\(\s*\w+\s+SOURCES\s+([^)]*?)(?:\s+LIBS|\s+TIMEOUT|\))",
                             text, re.S):
            for src in m.group(1).split():
                out.add("%s/%s" % (d, src))
                out.add("%s/%s" % (d, src[:-2] + ".h"))
    return out


def check(root):
    uses, sole = read_table(root)
    missing = [d for d in MODULE_DIRS if d not in uses]
    if missing:
        return ["docs/architecture.md's module table lacks rows for %s" % ", ".join(missing)]
    tests = test_sources(root)
    bad = []

    def allowed(mod, dep, include=True):
        """A sole includer's foreign API is its alone to include; linking it
        through a module that uses it (a static archive's consumers) is fine."""
        if dep == mod or sole.get(dep) == mod:
            return True
        if include and dep in sole:
            return False
        reach = closure(uses, mod)
        return dep in reach or sole.get(dep) in reach

    inc = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')
    for d in MODULE_DIRS:
        for name in sorted(os.listdir(os.path.join(root, d))):
            rel = "%s/%s" % (d, name)
            if not name.endswith((".c", ".h")) or rel in tests:
                continue
            mod = d
            with open(os.path.join(root, rel), errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = inc.match(line)
                    if not m:
                        continue
                    kind, target = m.groups()
                    dep = None
                    if kind == '"' and target.startswith("../"):
                        parts = target.split("/")
                        if len(parts) == 3 and parts[1] in MODULE_DIRS:
                            dep = parts[1]
                        elif parts[1] in ("node", "coordinator", "tests", "bench",
                                          "chaos-tests"):
                            dep = parts[1]
                    elif kind == '"' and target == "lapse.pb-c.h":
                        dep = "proto"
                    elif kind == '"':
                        dep = d
                    else:
                        for prefix, foreign in FOREIGN_INCLUDES.items():
                            if target.startswith(prefix):
                                dep = foreign
                    if dep is not None and not allowed(mod, dep):
                        bad.append("%s:%d: %s (%s) includes %s (%s): not in its row of "
                                   "docs/architecture.md" % (rel, lineno, rel, mod, target, dep))
    bad += proto_type_uses(root)
    # Link edges of the production targets.
    for d, text in cmake_lists(root):
        for m in re.finditer(r"target_link_libraries\((\S+)\s+(?:PUBLIC|PRIVATE|INTERFACE)?"
                             r"([^)]*)\)", text):
            target = m.group(1)
            if target.endswith("_test") or target in ("lapse_testkit",):
                continue
            mod = d
            for lib in re.split(r"[\s$]+", m.group(2)):
                lib = lib.strip("{}")
                if lib == "LAPSE_CLIENT_MODULES":
                    libs = re.search(r"set\(LAPSE_CLIENT_MODULES([^)]*)\)", text)
                    names = libs.group(1).split() if libs else []
                else:
                    names = [lib]
                for n in names:
                    dep = LINK_NAMES.get(n)
                    if dep is not None and not allowed(mod, dep, include=False):
                        bad.append("%s/CMakeLists.txt: %s (%s) links %s (%s): not in its row "
                                   "of docs/architecture.md" % (d, target, mod, n, dep))
    return bad


def proto_type_uses(root):
    """Generated protobuf types named outside PROTO_TYPE_DIRS, test files
    (lapse_test() sources, *_test.c, *_testutil.[ch]) aside."""
    tests = test_sources(root, PROTO_TYPE_SCANNED)
    bad = []
    for d in PROTO_TYPE_SCANNED:
        if d in PROTO_TYPE_DIRS or not os.path.isdir(os.path.join(root, d)):
            continue
        for name in sorted(os.listdir(os.path.join(root, d))):
            rel = "%s/%s" % (d, name)
            if not name.endswith((".c", ".h")) or rel in tests or TEST_FILE.search(name):
                continue
            with open(os.path.join(root, rel), errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = PROTO_TYPE.search(line)
                    if m:
                        bad.append("%s:%d: %s (%s) names the generated protobuf type %s...: only "
                                   "%s may (docs/architecture.md, \"Dependency rules\")" %
                                   (rel, lineno, rel, d, m.group(1),
                                    ", ".join("%s/" % x for x in sorted(PROTO_TYPE_DIRS))))
                        break
    return bad


def self_test():
    """The check passes on a copy of the tree and fails on each planted edge."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    plants = [("client/item.c", '#include "../storage/db.h"\n', "storage"),
              ("rpc/wire.c", '#include "../node/node.h"\n', "node"),
              ("node/maps.c", "#include <rocksdb/c.h>\n", "rocksdb"),
              ("placement/hash.c", '#include "../partition/store.h"\n', "partition"),
              ("dynamodb/ddb_api.c", "#include <nng/nng.h>\n", "nng"),
              ("placement/pmap.c", "static Lapse__PartitionMap *planted;\n", "placement"),
              ("chaos-tests/plant.c", "/* LAPSE__REQUEST__INIT */\n", "chaos-tests"),
              ("common/buf.c", "void lapse__x(void);\n", "common")]
    failures = 0
    for path, line, dep in plants:
        tmp = tempfile.mkdtemp(prefix="layering_check.")
        try:
            for d in MODULE_DIRS + ["docs", "chaos-tests", "bench"]:
                shutil.copytree(os.path.join(here, d), os.path.join(tmp, d),
                                ignore=shutil.ignore_patterns("build*", "*.o"))
            with open(os.path.join(tmp, path), "a") as f:
                f.write(line)
            bad = check(tmp)
            if not any(path in b and "(%s)" % dep in b for b in bad):
                print("layering_check: self-test: a planted %s -> %s was not caught" %
                      (path, dep))
                failures += 1
        finally:
            shutil.rmtree(tmp)
    if check(here):
        print("layering_check: self-test: the real tree does not pass")
        failures += 1
    print("layering_check: self-test: %d failure(s) in %d plants and the real tree" %
          (failures, len(plants)))
    return 1 if failures else 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    root = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else \
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad = check(root)
    for b in bad:
        print(b)
    if bad:
        print("layering_check: %d edge(s) or protobuf type use(s) not allowed by "
              "docs/architecture.md (its module table and dependency rules); fix the code or, "
              "if the design changed, the doc" % len(bad))
        return 1
    print("layering_check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
