"""A real OpenSSH server on 127.0.0.1 for the sftp:// tests (tests/remote/test_sftp.py).

    with Sshd(tmp_parent) as sshd:        # or sshd.start() ... sshd.stop()
        url = sshd.url("//abs/path/to/repo")
        env = {"BORG_RSH": sshd.rsh()}

Each Sshd is `/usr/sbin/sshd -D -e -f CONFIG` in the foreground (so its PID is the listener's
and it is stopped by that PID), on a free high port, with its own throwaway ed25519 host and
client keys, authorized_keys and log in a temporary folder. The system sshd, /etc/ssh and
~/.ssh are never touched: `-f` names our config, and the client runs with `-F /dev/null`.

It logs in as the user running the tests: root (PermitRootLogin prohibit-password lets the key
in), or an ordinary user, for whom sshd runs unprivileged (no privilege separation, so no
/run/sshd, and only that user can log in). `UsePAM no` because PAM would want a real login;
`StrictModes no` because the keys sit under /tmp, which is world-writable.

Variants (constructor arguments): `subsystem=None` leaves out `Subsystem sftp` (ssh -s then
fails with "subsystem request failed"); `force_command` (e.g. "internal-sftp -d /start": the
login folder the relative sftp:// paths start from); `chroot` (a ChrootDirectory: root only,
see make_chroot_root).

Background: ../shared/design/borg-serve-protocol.md section 3.1 (measured on this machine).
Python 3 standard library only.
"""

import fcntl
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
PRIVSEP_DIR = "/run/sshd"  # sshd as root refuses to start without it

def skip_unless_available():
    """unittest.SkipTest (the reason is printed) when the OpenSSH server or client is missing."""
    if not os.access(SSHD, os.X_OK):
        raise unittest.SkipTest("%s is absent (Debian package openssh-server; ci/install-deps installs it)" % SSHD)
    for tool in ("ssh", SSH_KEYGEN):
        if shutil.which(tool) is None:
            raise unittest.SkipTest("%s is not on PATH (Debian package openssh-client)" % tool)


def is_root():
    return os.geteuid() == 0


def login_name():
    return pwd.getpwuid(os.geteuid()).pw_name


def free_port():
    """A port nothing listens on right now (the kernel's pick; another process could take it
    before sshd binds it, so Sshd.start retries on a bind failure)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid):
    """True while the process exists and is not a zombie (PID 1 of a container may not reap)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def make_key(path):
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "borgcheck-test", "-f", path],
                   check=True, stdin=subprocess.DEVNULL)
    return path


def make_chroot_root():
    """A folder sshd accepts as ChrootDirectory: it and every folder above it owned by root and
    writable by nobody else. /tmp (mode 1777) fails that, so it is made directly under /, mode
    0700 (root only; the caller removes it with shutil.rmtree)."""
    if not is_root():
        raise unittest.SkipTest("a ChrootDirectory must be owned by root: the chroot tests run as root only")
    return tempfile.mkdtemp(prefix="borgcheck-sftp-chroot-", dir="/")


def rsh_command(key, extra=(), known_hosts=None):
    """The BORG_RSH string for a client key (the port goes in the URL: borgcheck adds -p).
    Any host key is accepted, unless `known_hosts` names the file to check it against (ssh
    takes the first value of an option, so a later -o could not override these)."""
    if known_hosts is None:
        hosts = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    else:
        hosts = ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + known_hosts]
    args = ["ssh", "-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"] + hosts + \
        ["-o", "LogLevel=ERROR"]
    return shlex.join(args + list(extra))


class Sshd:
    def __init__(self, subsystem="internal-sftp", force_command=None, chroot=None):
        self.subsystem, self.force_command, self.chroot = subsystem, force_command, chroot
        self.proc = None
        self.dir = None
        self.port = None
        self.user = login_name()

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self):
        skip_unless_available()
        if self.chroot and not is_root():
            raise unittest.SkipTest("ChrootDirectory needs sshd to run as root")
        self.dir = tempfile.mkdtemp(prefix="borgcheck-sshd-")
        self.host_key = make_key(os.path.join(self.dir, "host_ed25519"))
        self.client_key = make_key(os.path.join(self.dir, "client_ed25519"))
        shutil.copyfile(self.client_key + ".pub", os.path.join(self.dir, "authorized_keys"))
        self._hold_privsep_dir()
        try:
            for _ in range(5):  # a port taken between free_port() and sshd's bind: try another
                self.port = free_port()
                if self._launch():
                    return self
            raise RuntimeError("sshd did not start; its log:\n" + self.log())
        except BaseException:
            self.stop()
            raise

    def stop(self):
        """Stops the listener by its PID. Sessions still open end when their clients go (the
        tests end every client first); then removes the temporary folder and /run/sshd if this
        module made it."""
        if self.proc is not None:
            # Sessions outlive the listener (they are reparented to init): note them first.
            sessions = self.session_pids()
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
            self._end_sessions(sessions)
        self._release_privsep_dir()
        if self.dir is not None:
            shutil.rmtree(self.dir, True)
            self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- what the tests use -------------------------------------------------------------------

    def url(self, path, user=None):
        """sftp://USER@127.0.0.1:PORT + path: "//abs" for an absolute path, "rel" or "/rel" for
        one relative to the login folder."""
        if not path.startswith("/"):
            path = "/" + path
        return "sftp://%s@127.0.0.1:%d%s" % (user or self.user, self.port, path)

    def rsh(self, *extra, known_hosts=None):
        return rsh_command(self.client_key, extra, known_hosts)

    def other_key(self):
        """A client key that authorized_keys does not list."""
        path = os.path.join(self.dir, "stranger_ed25519")
        return path if os.path.exists(path) else make_key(path)

    def log(self):
        try:
            with open(os.path.join(self.dir, "sshd.log"), errors="replace") as f:
                return f.read()[-4000:]
        except (OSError, TypeError):
            return ""

    def session_pids(self, cmdline_contains=None):
        """PIDs of this sshd's descendants (its sessions and their children), optionally only
        those whose command line contains `cmdline_contains` (e.g. "sftp": the session
        process of internal-sftp is titled "sshd: USER@internal-sftp"). Read from /proc, so
        only this server's processes are ever found."""
        if self.proc is None:
            return []
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open("/proc/%s/stat" % entry) as f:
                        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
                        parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        found = []
        for pid in parents:
            p = parents[pid]
            while p in parents and p != self.proc.pid:
                p = parents[p]
            if p != self.proc.pid:
                continue
            if cmdline_contains is not None:
                try:
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        if cmdline_contains.encode() not in f.read():
                            continue
                except OSError:
                    continue
            found.append(pid)
        return sorted(found)

    # -- internals ----------------------------------------------------------------------------

    def config_text(self):
        lines = [
            "Port %d" % self.port,
            "ListenAddress 127.0.0.1",
            "HostKey %s" % self.host_key,
            "PidFile none",
            "AuthorizedKeysFile %s" % os.path.join(self.dir, "authorized_keys"),
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            "StrictModes no",
            # No reverse lookups of 127.0.0.1 (nothing outside the machine is asked).
            "UseDNS no",
        ]
        if self.subsystem:
            lines.append("Subsystem sftp %s" % self.subsystem)
        if self.chroot:
            lines.append("ChrootDirectory %s" % self.chroot)
        if self.force_command:
            lines.append("ForceCommand %s" % self.force_command)
        return "\n".join(lines) + "\n"

    def _launch(self):
        config = os.path.join(self.dir, "sshd_config")
        with open(config, "w") as f:
            f.write(self.config_text())
        check = subprocess.run([SSHD, "-t", "-f", config], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError("sshd -t refused the config:\n%s%s" % (check.stderr, self.config_text()))
        log = open(os.path.join(self.dir, "sshd.log"), "ab")
        try:
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", config], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)
        finally:
            log.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                return False  # e.g. the port was taken meanwhile ("Address already in use")
            # Ours, not another process's: sshd says it bound the port before we connect (a port
            # taken between free_port() and sshd's bind would otherwise answer for it).
            if "Server listening on 127.0.0.1 port %d." % self.port not in self.log():
                time.sleep(0.02)
                continue
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("sshd did not accept connections within 15 s; its log:\n" + self.log())

    @staticmethod
    def _end_sessions(pids):
        """Sessions of a client that was killed end by themselves once ssh's side closes; any
        still there after a few seconds (a client that hangs) get SIGTERM, by PID."""
        deadline = time.monotonic() + 5
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.05)
        for p in pids:
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def _hold_privsep_dir(self):
        """As root: makes sure /run/sshd exists while this server runs. Every harness server (of
        any process: the tests and the benchmark may run side by side) holds a shared flock on
        the folder; the one that created it removes it at the end only if it can take the lock
        exclusively, i.e. no other harness server is using it (else it is left: Debian's own
        sshd makes the same folder, and it is harmless)."""
        if not is_root():
            return
        for _ in range(20):
            created = False
            try:
                os.mkdir(PRIVSEP_DIR, 0o755)
                created = True
            except FileExistsError:
                pass
            try:
                fd = os.open(PRIVSEP_DIR, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                continue  # removed just now by another harness: make it again
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(PRIVSEP_DIR))
            except FileNotFoundError:
                same = False
            if same:
                self._privsep = (fd, created)
                return
            os.close(fd)  # we locked a folder another harness removed meanwhile
        raise RuntimeError("could not hold %s" % PRIVSEP_DIR)

    def _release_privsep_dir(self):
        held = getattr(self, "_privsep", None)
        if held is None:
            return
        self._privsep = None
        fd, created = held
        try:
            if created:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.rmdir(PRIVSEP_DIR)
        except OSError:
            pass  # another server holds it, or something was put in it: leave it
        finally:
            os.close(fd)
