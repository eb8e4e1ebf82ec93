"""Scaffolding shared by the interop tests that run real borg (1.x and borg2 2.0.0b5) at test time.

- run(), write(): a command that must succeed (its stderr in the failure), a file with its folders.
- snapshot(): a repository's files, sizes, mtimes and contents, to assert that borgcheck left the
  repository it read unchanged.
- clean_environment(): the caller's environment without its BORG_* and XDG_* variables, the start
  of every environment these tests give borg and borgcheck (a developer's BORG_KEYS_DIR,
  BORG_HOST_ID, BORG_BASE_DIR or XDG_CACHE_HOME must not leak into a run).
- Generation, build_generations(), remove_scratch(): one repository per borg generation in a
  scratch folder, built in parallel, for tests that repeat each step with borg 1.x and borg2
  (archive_pass_test.py, metadata_damage_test.py, checker/archive/archive_interop_test.py).

Python 3 standard library only. Tests import it after putting tests/interop on sys.path.
"""

import hashlib
import os
import shutil
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor

PASSPHRASE = "test"  # of every repository a Generation makes


def run(cmd, cwd=None, env=None, check=True):
    """subprocess.run with stdout and stderr captured (bytes); with check, a non-zero exit raises
    AssertionError with the command, its exit status and the end of its stderr."""
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} failed ({p.returncode}):\n{p.stderr.decode(errors='replace')[-3000:]}")
    return p


def write(path, data):
    """Writes bytes `data` to `path`, making its folders first."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def snapshot(repo):
    """{relative path: (kind, size, mtime_ns, sha256)} of every file and directory below `repo`,
    and of `repo` itself ("."); links are not followed. Two snapshots of one path are equal when
    nothing in it was added, removed, rewritten or touched."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        for name in dirnames + filenames + ["."]:
            p = os.path.normpath(os.path.join(dirpath, name))
            st = os.lstat(p)
            digest = None
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(p, repo)] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, digest)
    return out


def clean_environment():
    """A copy of os.environ without the caller's BORG_* and XDG_* variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("BORG_", "XDG_"))}


class Generation:
    """One borg generation's repository, made in `scratch`/`name`/repo: "borg1" for borg 1.x
    (`borg WORDS REPO::ARCHIVE`), any other name for borg2 (`borg2 -r REPO WORDS ARCHIVE`).
    Subclasses write build(), which makes self.repo (self.dir does not exist before it).

    self.env is for borg and borgcheck alike: clean_environment(), PASSPHRASE, BORG_BASE_DIR
    `dir`/base, the answers to borg's questions (copies are "relocated"; check --repair and
    delete), TZ=UTC. borg commands run with BORG_BASE_DIR `dir`/base, or, where
    PER_COPY_BASE_DIR is set, `dir`/base-<the repository folder's name>: copies share the
    repository id, and borg keeps its security folder (location, manifest timestamp) and cache
    per id, so in one base folder what borg does to one copy shows in its view of the others."""

    PER_COPY_BASE_DIR = False

    def __init__(self, name, exe, scratch):
        self.name = name
        self.exe = exe
        self.dir = os.path.join(scratch, name)
        self.repo = os.path.join(self.dir, "repo")
        self.env = dict(clean_environment(), BORG_PASSPHRASE=PASSPHRASE, BORG_BASE_DIR=os.path.join(self.dir, "base"),
                        BORG_RELOCATED_REPO_ACCESS_IS_OK="yes", BORG_CHECK_I_KNOW_WHAT_I_AM_DOING="YES",
                        BORG_DELETE_I_KNOW_WHAT_I_AM_DOING="YES", TZ="UTC")
        self.copies = 0

    def borg_env(self, repo):
        """The environment of a borg command on `repo` (see the class)."""
        if not self.PER_COPY_BASE_DIR:
            return self.env
        return dict(self.env, BORG_BASE_DIR=os.path.join(self.dir, "base-" + os.path.basename(repo)))

    def borg(self, repo, words, archive=None, tail=(), cwd=None, check=True):
        """run() of `borg WORDS REPO[::ARCHIVE] TAIL` (borg1) or `borg2 -r REPO WORDS [ARCHIVE] TAIL`."""
        if self.name == "borg1":
            cmd = [self.exe, *words, f"{repo}::{archive}" if archive else repo, *tail]
        else:
            cmd = [self.exe, "-r", repo, *words, *([archive] if archive else []), *tail]
        return run(cmd, cwd=cwd, check=check, env=self.borg_env(repo))

    def build(self):
        raise NotImplementedError

    def copy(self, label):
        """A new copy of the repository (links kept as links): `dir`/copy-LABEL-N."""
        self.copies += 1
        c = os.path.join(self.dir, f"copy-{label}-{self.copies}")
        shutil.copytree(self.repo, c, symlinks=True)
        return c


def build_generations(cls, scratch, borg1, borg2):
    """{"borg1": cls("borg1", borg1, scratch), "b5": cls("b5", borg2, scratch)}, both built (their
    build()) in parallel; the first failure is raised once both have finished."""
    gens = {"borg1": cls("borg1", borg1, scratch), "b5": cls("b5", borg2, scratch)}
    with ThreadPoolExecutor(2) as ex:
        for f in [ex.submit(g.build) for g in gens.values()]:
            f.result()
    return gens


def remove_scratch(scratch):
    """Removes a test module's scratch folder, unless BORGCHECK_KEEP_SCRATCH is set (to look at it)."""
    if scratch and not os.environ.get("BORGCHECK_KEEP_SCRATCH"):
        shutil.rmtree(scratch, ignore_errors=True)
