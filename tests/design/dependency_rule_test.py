#!/usr/bin/env python3
"""The dependency rule of docs/design.md, checked on every #include and every library link.

- A repository generation (checker/repo/borg1, borg2b5, borgstore) includes only the leaves
  (base, crypto, codecs, io, keys, report, archive), the engine's interface headers (ENGINE_INTERFACE below;
  never engine.h or the engine's other implementation headers), repo/'s own shared headers, its own folder and the shared folders it is
  allowed (segment_log/: borg1 and borg2b5; borg2/: borg2b5 and borgstore). Never pool/, run/,
  cli/ or another generation. Its CMake library links neither borgcheck::engine nor
  borgcheck::pool.
- The shared folders segment_log/ and borg2/ include no generation.
- The engine includes pool, report, io, archive and base, and never a generation, schedule/, run/
  or cli/: partial runs (schedule/) sit above it, behind engine/run_schedule.h.
- schedule/ includes the engine's headers and the leaves, never a generation, pool/, run/ or cli/.
- The leaves (crypto, codecs, pool, report, io, archive, base) include no repo/, engine/, run/
  or cli/ code; keys/ includes no repo/, engine/, run/ or cli/.

Run: dependency_rule_test.py SOURCE_DIR. Prints every violation and exits 1 if there is one;
prints the number of includes checked otherwise.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GENERATIONS = ["borg1", "borg2b5", "borgstore"]
SHARED = {"segment_log": ["borg1", "borg2b5"], "borg2": ["borg2b5", "borgstore"]}
LEAVES = ["checker/base/", "checker/crypto/", "codecs/", "checker/io/", "checker/keys/", "checker/report/",
          "checker/archive/", "checker/remote/"]
# remote/ (io::Env over SFTP through ssh) is a leaf that uses only base/ and io/; only cli/ and
# run/ (which pick the Env of a run) may include it.
REMOTE_USES = ("base", "io", "remote")
REMOTE_USERS = ("remote", "cli", "run")
# The engine's interface: the only engine headers a generation may include. Everything else in
# checker/engine/ (engine.h, the budget, the filter, partial runs and their state, the archive
# pass, the key fallback) is the engine's implementation.
ENGINE_INTERFACE = ["checker/engine/object_source.h", "checker/engine/object_verifier.h",
                    "checker/engine/archive_source.h", "checker/engine/check_options.h"]


def is_engine_implementation(inc):
    return inc.startswith("checker/engine/") and inc not in ENGINE_INTERFACE
# Test-only helpers beside library code whose names do not say "_test": compiled only into tests.
TEST_ONLY = {"master_fixture_plaintexts.cc", "master_fixture_plaintexts.h"}


def folder_of(path):
    """'checker/repo/borg1/x.cc' -> ('repo', 'borg1'); 'checker/engine/x.h' -> ('engine', None)."""
    parts = path.split("/")
    if parts[0] == "codecs":
        return ("codecs", None)
    if parts[0] != "checker" or len(parts) < 3:
        return (None, None)
    if parts[1] == "repo":
        return ("repo", parts[2] if len(parts) > 3 else None)
    return (parts[1], None)


def violation(src, inc):
    kind, sub = folder_of(src)
    ikind, isub = folder_of(inc)
    if not inc.startswith(("checker/", "codecs/")):
        return None  # a system or test header
    if kind == "remote" and ikind not in REMOTE_USES:
        return "leaf remote/ includes %s (base and io only)" % inc
    if ikind == "remote" and kind not in REMOTE_USERS:
        return "%s includes remote/ (only cli/ and run/ may)" % (kind or src)
    if kind == "repo" and sub in GENERATIONS:
        if is_engine_implementation(inc):
            return "a generation includes the engine's implementation"
        if ikind in ("pool", "schedule", "run", "cli"):
            return "a generation includes %s/" % ikind
        if ikind == "repo" and isub is not None and isub != sub:
            if isub in SHARED:
                if sub not in SHARED[isub]:
                    return "%s may not use repo/%s/ (shared by %s only)" % (sub, isub, ", ".join(SHARED[isub]))
            else:
                return "generation %s includes generation %s" % (sub, isub)
        return None
    if kind == "repo" and sub in SHARED:
        if ikind == "repo" and isub is not None and isub != sub and isub not in SHARED:
            return "shared folder repo/%s includes generation %s" % (sub, isub)
        if ikind in ("pool", "schedule", "run", "cli") or is_engine_implementation(inc):
            return "shared folder repo/%s includes %s" % (sub, inc)
        return None
    if kind == "repo" and sub is None:  # repo/'s own files (format_detect, borg_lock, ...)
        if ikind == "repo" and isub in GENERATIONS:
            return "repo/ includes generation %s" % isub
        if ikind in ("pool", "schedule", "run", "cli", "engine"):
            return "repo/ includes %s/" % ikind
        return None
    if kind == "engine":
        if ikind in ("repo", "schedule", "run", "cli", "keys", "crypto", "codecs"):
            return "the engine includes %s" % inc
        return None
    if kind == "schedule":
        if ikind in ("repo", "pool", "run", "cli", "keys", "crypto", "codecs"):
            return "schedule/ includes %s" % inc
        return None
    if kind in ("base", "crypto", "codecs", "pool", "report", "io", "archive"):
        if ikind in ("repo", "engine", "schedule", "run", "cli", "keys") and not (kind == ikind):
            return "leaf %s/ includes %s" % (kind, inc)
        if kind in ("base", "crypto", "codecs", "pool", "report", "io", "archive") and ikind == "pool" and kind != "pool":
            return "leaf %s/ includes the pool" % kind
        return None
    if kind == "keys":
        if ikind in ("repo", "engine", "schedule", "run", "cli"):
            return "keys/ includes %s" % inc
    return None


def check_links(root):
    bad = []
    link = re.compile(r"target_link_libraries\([^)]*\)", re.S)
    for gen in GENERATIONS:
        cml = os.path.join(root, "checker", "repo", gen, "CMakeLists.txt")
        text = open(cml).read()
        for block in link.findall(text):
            if "borgcheck_test" in block:
                continue
            for lib in ("borgcheck::engine", "borgcheck::pool", "borgcheck::run"):
                if lib in block:
                    bad.append("%s: links %s" % (os.path.relpath(cml, root), lib))
            for other in GENERATIONS:
                if other != gen and "borgcheck::%s " % other in block + " ":
                    bad.append("%s: links generation %s" % (os.path.relpath(cml, root), other))
    return bad


def self_test():
    """The rule must catch each kind of violation: each line is (file, include, must fail)."""
    cases = [
        ("checker/repo/borg1/a.cc", "checker/engine/engine.h", True),
        ("checker/repo/borg1/a.cc", "checker/engine/object_source.h", False),
        ("checker/repo/borg2b5/a.cc", "checker/schedule/partial_run.h", True),
        ("checker/repo/borg2b5/a.cc", "checker/engine/run_schedule.h", True),
        ("checker/engine/a.cc", "checker/schedule/partial_run.h", True),
        ("checker/schedule/a.cc", "checker/engine/engine.h", False),
        ("checker/schedule/a.cc", "checker/repo/borg1/borg1_source.h", True),
        ("checker/schedule/a.cc", "checker/pool/work_stealing_pool.h", True),
        ("checker/repo/borgstore/a.cc", "checker/engine/byte_budget.h", True),
        ("checker/repo/segment_log/a.cc", "checker/schedule/unit_state.h", True),
        ("checker/repo/borg2/a.cc", "checker/engine/check_options.h", False),
        ("checker/repo/borg1/a.cc", "checker/pool/work_stealing_pool.h", True),
        ("checker/repo/borg1/a.cc", "checker/run/check_run.h", True),
        ("checker/repo/borg1/a.cc", "checker/repo/borgstore/borgstore_layout.h", True),
        ("checker/repo/borg1/a.cc", "checker/repo/segment_log/segment_files.h", False),
        ("checker/repo/borg1/a.cc", "checker/repo/borg2/borg2_repo_obj.h", True),
        ("checker/repo/borgstore/a.cc", "checker/repo/borg2/borg2_repo_obj.h", False),
        ("checker/repo/borgstore/a.cc", "checker/repo/segment_log/segment_files.h", True),
        ("checker/repo/segment_log/a.cc", "checker/repo/borg1/borg1_plan.h", True),
        ("checker/engine/a.cc", "checker/repo/borg1/borg1_source.h", True),
        ("checker/engine/a.cc", "checker/pool/work_stealing_pool.h", False),
        ("checker/crypto/a.cc", "checker/repo/chunk_id.h", True),
        ("codecs/a.cc", "checker/engine/object_verifier.h", True),
        ("checker/keys/a.cc", "checker/repo/borg1/borg1_config.h", True),
        ("checker/remote/a.cc", "checker/io/env.h", False),
        ("checker/remote/a.cc", "checker/base/text_escape.h", False),
        ("checker/remote/a.cc", "checker/report/finding.h", True),
        ("checker/remote/a.cc", "checker/engine/engine.h", True),
        ("checker/run/a.cc", "checker/remote/sftp_env.h", False),
        ("checker/cli/a.cc", "checker/remote/sftp_env.h", False),
        ("checker/engine/a.cc", "checker/remote/sftp_env.h", True),
        ("checker/io/a.cc", "checker/remote/sftp_env.h", True),
        ("checker/repo/borg1/a.cc", "checker/remote/sftp_env.h", True),
        ("checker/repo/a.cc", "checker/remote/sftp_env.h", True),
    ]
    wrong = [(f, i, fail) for f, i, fail in cases if (violation(f, i) is not None) != fail]
    for f, i, fail in wrong:
        print("self-test: %s including %s should %s" % (f, i, "fail" if fail else "pass"))
    return 1 if wrong else 0


def main():
    if sys.argv[1:2] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    bad, checked = [], 0
    for top in ("checker", "codecs"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                # Tests and test-only helpers (compiled into test binaries only) may reach anywhere.
                if not f.endswith((".h", ".cc")) or "_test" in f or f in TEST_ONLY:
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                for n, line in enumerate(open(os.path.join(root, path), encoding="utf-8", errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    checked += 1
                    why = violation(path, m.group(1))
                    if why:
                        bad.append("%s:%d: #include \"%s\": %s" % (path, n, m.group(1), why))
    bad += check_links(root)
    for b in bad:
        print(b)
    if bad:
        print("%d violation(s) of the dependency rule (docs/design.md)" % len(bad))
        return 1
    if checked < 100:
        print("only %d includes found: wrong source directory?" % checked)
        return 1
    print("dependency rule holds: %d includes checked" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
