#!/usr/bin/env python3
"""docs_refs_check.py: every file path and every code name a document quotes
(in backticks) must exist in the tree, so that the map stays true when code
moves. A path must be a tracked file (or end one); a name with an underscore
must appear in some tracked source, build or test file. Exit 1 with each stale
reference listed; `--self-test` plants stale ones and expects them caught."""
import os
import re
import subprocess
import sys

SOURCE_EXT = ('.c', '.h', '.py', '.sh', '.proto', '.re', '.y', '.txt', '.cmake', '.yml', '.in',
              '.service', '.conf', '.json', '.toml', 'Makefile', '.lemon')
PATH_RE = re.compile(r'`\.{0,2}/?([A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:c|h|py|sh|proto|re|y))`')
NAME_RE = re.compile(r'`([a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9])(?:\(\))?`')
# Quoted on purpose though not in the tree: placeholders, another project's
# names, installed paths and files the tests write.
ALLOWED = {'x.h', 'x.c', 'rocksdb/c.h', 'include/lapse/lapse.h', 'include/lapse/lapse_err.h',
           'rocksdb_iter_get_error', 'finish_task_switch', 'try_to_wake_up', 'nni_task_dispatch',
           'nng_ctx_recv', 'bytes_per_sync', 'wal_bytes_per_sync', 'attribute_exists',
           'attribute_not_exists', 'attribute_type', 'if_not_exists', 'list_append',
           # tables the chaos harness named in runs docs/chaos.md tells of
           'chaos_bf23', 'chaos_bf28', 'chaos_pr9'}


def tracked(root):
    """The tree's files: git's tracked ones, or every file outside build
    folders when root is not a checkout."""
    if os.path.exists(os.path.join(root, '.git')):
        out = subprocess.check_output(['git', '-C', root, 'ls-files'], text=True)
        return [f for f in out.split('\n') if f]
    files = []
    for d, subdirs, names in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith(('.', 'build'))]
        files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return files


def check(root, docs, files):
    """Returns the stale references of docs as (doc, reference) pairs."""
    paths = set(files)
    code = []
    for f in files:
        if f.endswith(SOURCE_EXT) and not f.endswith('.md'):
            try:
                with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
                    code.append(fh.read())
            except OSError:
                pass
    text = '\n'.join(code)
    words = set(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', text))
    stale = []
    for d in docs:
        with open(os.path.join(root, d), encoding='utf-8') as fh:
            doc = fh.read()
        for m in PATH_RE.finditer(doc):
            p = m.group(1)
            if p in ALLOWED or p in paths or any(f.endswith('/' + p) for f in paths):
                continue
            stale.append((d, p))
        for m in NAME_RE.finditer(doc):
            n = m.group(1)
            if n in ALLOWED or n in words:
                continue
            stale.append((d, n))
    return stale


def docs_of(files):
    return [f for f in files if f.endswith('.md') and (f.startswith('docs/') or '/' not in f)]


def self_test(root):
    import tempfile
    files = tracked(root)
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, 'bad.md')
        # The stale name is put together here so that this file, which the
        # check reads as code, does not hold it whole.
        ghost = 'store_commit_' + 'nowhere'
        with open(bad, 'w') as fh:
            fh.write('See `node/no_such_file.c` and `%s()`, '
                     'but `partition/store_commit.c` and `store_commit` are real.\n' % ghost)
        stale = check(root, [os.path.relpath(bad, root)], files)
        want = {'node/no_such_file.c', ghost}
        got = {r for _, r in stale}
        if got != want:
            print('docs_refs_check self-test: expected %s, got %s' % (sorted(want), sorted(got)))
            return 1
    print('docs_refs_check self-test: planted stale references caught')
    return 0


def main():
    args = sys.argv[1:]
    root = args[args.index('--root') + 1] if '--root' in args else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    if '--self-test' in sys.argv[1:]:
        return self_test(root)
    files = tracked(root)
    stale = check(root, docs_of(files), files)
    for d, r in stale:
        print('%s: `%s` is in no tracked file (renamed or removed? update the doc)' % (d, r))
    if stale:
        return 1
    print('docs_refs_check: every quoted path and name of %d documents exists' % len(docs_of(files)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
