"""A real one-node Slurm cluster on 127.0.0.1 for the Slurm tests (tests/slurm/test_slurm.py).

    with SlurmCluster() as cluster:         # or cluster.start() ... cluster.stop()
        subprocess.run(["sbatch", ...], env=cluster.env())
        cluster.wait_for_jobs([job_id])     # until squeue no longer lists them
        cluster.job_tasks(job_id)           # [(array task id or None, state, exit code)]

Everything lives in one temporary folder: a munge key, munged's socket, pid, seed and log; the
cluster's slurm.conf; slurmctld's state and slurmd's spool; every daemon's pid and log file.
The three daemons are children of this process, in the foreground, and are stopped by their
PIDs (reverse order: slurmd, slurmctld, munged), on a failed start too:

  1. munged --foreground with its own key, socket, pid, seed and log files (/etc/munge and
     /run/munge are never used). `--force`: munged refuses a socket under a world-writable
     folder such as /tmp otherwise; its permission checks protect a real key, not this one.
  2. slurm.conf: one node, named as `slurmd -C` says (this machine's short host name), with its
     memory and at least MIN_CPUS CPUs (config_overrides), NodeAddr=127.0.0.1, SlurmctldHost
     NAME(127.0.0.1), two free ports picked now,
     `AuthInfo=socket=...` so every daemon and command talks to our munged, proctrack/linuxproc
     and task/none (no cgroups), no accounting, state in the temporary folder, and the
     scheduler started at once on every event (batch_sched_delay=0, sched_min_interval=0).
  3. slurmctld -D -c -i (no saved state), until `scontrol ping` says UP.
  4. slurmd -D, until `sinfo` shows the node idle.
Each wait is bounded; a failure raises with the tail of every daemon's log.

Stop: jobs still queued or running are cancelled (scancel), slurmstepd's leftovers are given a
few seconds to go (each job step is a daemonised slurmstepd, not our child), then the daemons
get SIGTERM (SIGKILL after 10 s). A process still carrying this cluster's SLURM_CONF in its
environment after that (a job or slurmstepd that outlived slurmd) gets SIGKILL by PID; no other
process is ever signalled. Then the folder is removed.

Slurm commands find the cluster through SLURM_CONF, which only env() sets: this process's own
environment is left alone, so a system cluster, if any, is never addressed by mistake.

Runs as root (CI: a fresh Debian 12 machine without systemd) or as any other user: the daemons
run as the user that starts them (SlurmUser, SlurmdUser), and so do the jobs. The daemons, key
and ports are this cluster's own, so it runs beside a system Slurm or another test's cluster. Needs Debian's munge, slurmctld, slurmd and slurm-client (ci/install-deps);
skip_unless_available() raises unittest.SkipTest naming what is missing.
Background: ../shared/design/slurm-local.sh. Python 3 standard library only.
"""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
COMMANDS = ("munge", "unmunge", "sbatch", "squeue", "sinfo", "scontrol", "scancel")
PACKAGES = "munge, slurmctld, slurmd, slurm-client"


def _find(tool):
    """A tool on PATH, or in /usr/sbin (the daemons live there; root's PATH has it, others' may not)."""
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


def missing_tools():
    return [t for t in DAEMONS + COMMANDS if _find(t) is None]


def skip_unless_available():
    """unittest.SkipTest (the reason is printed) when a Slurm or munge program is missing."""
    missing = missing_tools()
    if missing:
        raise unittest.SkipTest("%s not installed (Debian packages %s; ci/install-deps installs them)"
                                % (", ".join(missing), PACKAGES))


def free_port():
    """A TCP port nothing listens on right now, on any address (slurmctld and slurmd bind the
    wildcard address). Another process could take it before the daemon binds it: start() then
    tries again with new ports."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _alive(pid):
    """True while the process exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return "(%s)\n" % e


class ClusterError(RuntimeError):
    pass


class SlurmCluster:
    # Bounds of the waits in start() and stop(), in seconds.
    MUNGED_TIMEOUT = 10
    CTLD_TIMEOUT = 30
    NODE_TIMEOUT = 30
    STEP_TIMEOUT = 10
    DAEMON_STOP_TIMEOUT = 10
    # The node offers at least this many CPUs (SlurmdParameters=config_overrides: more than the
    # machine has), so that small test jobs run side by side rather than queue behind each
    # other's start and end; they share the real cores.
    MIN_CPUS = 8

    def __init__(self, parent=None):
        self.parent = parent
        self.dir = None
        self.conf = None
        self.node = None  # the node's name: this machine's short host name
        self.cpus = None
        self.memory = None
        self.ports = None  # (slurmctld's, slurmd's)
        self.munge_socket = None
        self.procs = []  # (name, Popen), in start order

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self):
        skip_unless_available()
        self.dir = tempfile.mkdtemp(prefix="borgcheck-slurm-", dir=self.parent)
        try:
            # slurmstepd and the jobs run as the job's user: make the folder readable to them.
            os.chmod(self.dir, 0o755)
            for sub in ("etc", "ctld", "spool", "log", "run", "munge"):
                os.mkdir(self.path(sub), 0o755)
            self.conf = self.path("etc", "slurm.conf")
            self._start_munged()
            self._probe_node()
            for _ in range(3):  # a port taken between free_port() and the bind: new ports
                self.ports = (free_port(), free_port())
                self._write_conf()
                if self._start_slurmctld():
                    break
            else:
                raise ClusterError("slurmctld did not start on three pairs of ports" + self._logs())
            self._start_slurmd()
            return self
        except BaseException:
            self.stop()
            raise

    def stop(self):
        """Cancels what is left, stops the daemons by PID, removes the folder. Safe to call twice."""
        if self.dir is None:
            return
        try:
            if self._running("slurmctld"):
                self.command(["scancel", "--quiet", "--full", "--partition", "debug"], check=False, timeout=10)
                self._wait_for_steps()
            for name, proc in reversed(self.procs):
                self._stop_process(name, proc)
            self.procs = []
            self._kill_leftovers()
        finally:
            shutil.rmtree(self.dir, True)
            self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- what the tests use -------------------------------------------------------------------

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def env(self, more=None, base=None):
        """The environment for Slurm commands: `base` (default: this process's), plus
        SLURM_CONF and `more`. A job gets the environment sbatch had (--export=ALL, Slurm's
        default)."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = self.conf
        env.update(more or {})
        return env

    def command(self, args, check=True, timeout=30, env=None):
        """Runs a Slurm command against this cluster; returns the CompletedProcess (text)."""
        p = subprocess.run(args, env=env or self.env(), stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise ClusterError("%s exited %d:\n%s%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr,
                                                          self._logs()))
        return p

    def wait_for_jobs(self, job_ids, timeout=60):
        """Waits until squeue lists none of `job_ids` (finished jobs leave it once they have
        completed; with no accounting database squeue is the place to look). Polls every
        0.1 s: `sbatch --wait` polls with a back-off of up to 10 s."""
        ids = ",".join(str(j) for j in job_ids)
        deadline = time.monotonic() + timeout
        while True:
            p = self.command(["squeue", "--noheader", "--jobs", ids, "--format", "%i %T"], check=False)
            if p.returncode == 0 and not p.stdout.strip():
                return
            if time.monotonic() > deadline:
                raise ClusterError("jobs %s still queued after %d s:\n%s%s" % (ids, timeout, p.stdout,
                                                                                self._logs()))
            time.sleep(0.1)

    def job_tasks(self, job_id):
        """[(array task id or None, state, exit code)] of a finished job or job array, from
        slurmctld's memory (MinJobAge keeps finished jobs there for 300 s; no accounting
        database). The exit code is the batch script's, or 128+N where a signal N ended it."""
        p = self.command(["scontrol", "--oneliner", "show", "job", str(job_id)])
        tasks = []
        for line in p.stdout.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if "JobState" not in fields:
                continue
            code, sig = (int(x) for x in fields["ExitCode"].split(":"))
            task = fields.get("ArrayTaskId")
            tasks.append((int(task) if task and task.isdigit() else None, fields["JobState"],
                          128 + sig if sig else code))
        return sorted(tasks, key=lambda t: (t[0] is None, t[0] or 0))

    def log_tails(self):
        return self._logs()

    # -- internals ----------------------------------------------------------------------------

    def _spawn(self, name, args, env=None):
        log = open(self.path("log", name + ".out"), "ab")
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env or self.env())
        finally:
            log.close()
        self.procs.append((name, proc))
        return proc

    def _running(self, name):
        return any(n == name and p.poll() is None for n, p in self.procs)

    def _start_munged(self):
        key = self.path("munge", "munge.key")
        subprocess.run([_find("mungekey"), "--create", "--keyfile=" + key], check=True,
                       stdin=subprocess.DEVNULL, capture_output=True)
        os.chmod(key, 0o600)
        self.munge_socket = self.path("munge", "munge.socket")
        proc = self._spawn("munged", [
            _find("munged"), "--foreground", "--force", "--socket=" + self.munge_socket, "--key-file=" + key,
            "--pid-file=" + self.path("run", "munged.pid"), "--log-file=" + self.path("log", "munged.log"),
            "--seed-file=" + self.path("munge", "munged.seed")])
        deadline = time.monotonic() + self.MUNGED_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ClusterError("munged exited %d" % proc.returncode + self._logs())
            if os.path.exists(self.munge_socket):
                cred = subprocess.run([_find("munge"), "--socket=" + self.munge_socket, "--no-input"],
                                      capture_output=True)
                if cred.returncode == 0 and subprocess.run(
                        [_find("unmunge"), "--socket=" + self.munge_socket], input=cred.stdout,
                        capture_output=True).returncode == 0:
                    return
            time.sleep(0.05)
        raise ClusterError("munged did not answer within %d s" % self.MUNGED_TIMEOUT + self._logs())

    def _probe_node(self):
        """This machine's node name, CPUs and memory, from `slurmd -C`'s first line
        (NodeName=<host> CPUs=2 Boards=1 ... RealMemory=24105)."""
        p = subprocess.run([_find("slurmd"), "-C"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           check=True, env=self.env())
        fields = dict(f.split("=", 1) for f in p.stdout.splitlines()[0].split() if "=" in f)
        if not {"NodeName", "CPUs", "RealMemory"} <= set(fields):
            raise ClusterError("slurmd -C printed no node line:\n" + p.stdout + p.stderr)
        self.node = fields["NodeName"]
        self.cpus = max(int(fields["CPUs"]), self.MIN_CPUS)
        self.memory = int(fields["RealMemory"])

    def _write_conf(self):
        name = self.node
        ctld_port, slurmd_port = self.ports
        text = """\
# A one-node test cluster (tests/slurm/slurm_cluster.py); everything under {dir}.
ClusterName=borgcheck-test
SlurmctldHost={name}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser={user}
SlurmdUser={user}
SlurmdParameters=config_overrides
AuthType=auth/munge
CryptoType=crypto/munge
AuthInfo=socket={munge}
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation={dir}/ctld
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/run/slurmctld.pid
SlurmdPidFile={dir}/run/slurmd.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MessageTimeout=10
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName={name} CPUs={cpus} RealMemory={memory} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
""".format(dir=self.dir, user=pwd.getpwuid(os.geteuid()).pw_name, name=name, ctld_port=ctld_port, slurmd_port=slurmd_port, munge=self.munge_socket,
           cpus=self.cpus, memory=self.memory)
        with open(self.conf, "w") as f:
            f.write(text)

    def _start_slurmctld(self):
        """True once it answers `scontrol ping`; False if it exited (a port taken: the caller
        tries new ports)."""
        proc = self._spawn("slurmctld", [_find("slurmctld"), "-D", "-c", "-i", "-f", self.conf])
        deadline = time.monotonic() + self.CTLD_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.procs.remove(("slurmctld", proc))
                return False
            p = self.command(["scontrol", "ping"], check=False, timeout=15)
            if "is UP" in p.stdout:
                return True
            time.sleep(0.1)
        raise ClusterError("slurmctld did not answer `scontrol ping` within %d s" % self.CTLD_TIMEOUT + self._logs())

    def _start_slurmd(self):
        proc = self._spawn("slurmd", [_find("slurmd"), "-D", "-f", self.conf])
        name = self.node
        deadline = time.monotonic() + self.NODE_TIMEOUT
        state = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ClusterError("slurmd exited %d" % proc.returncode + self._logs())
            state = self.command(["sinfo", "--noheader", "--nodes", name, "--format", "%T"], check=False).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.1)
        raise ClusterError("node %s is %r, not idle, after %d s" % (name, state, self.NODE_TIMEOUT) + self._logs())

    def _wait_for_steps(self):
        """Each job step's slurmstepd keeps a socket NODE_JOB.STEP in the spool folder until it
        has ended; bounded, what is left is killed after the daemons stop."""
        deadline = time.monotonic() + self.STEP_TIMEOUT
        while self._step_sockets() and time.monotonic() < deadline:
            time.sleep(0.1)

    def _step_sockets(self):
        prefix = self.node + "_"
        try:
            return [n for n in os.listdir(self.path("spool")) if n.startswith(prefix)]
        except OSError:
            return []

    def _stop_process(self, name, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self.DAEMON_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _kill_leftovers(self):
        """SIGKILL, by PID, any process whose environment holds this cluster's SLURM_CONF
        (a job or slurmstepd that outlived slurmd); only this cluster's processes carry it."""
        mark = b"\0SLURM_CONF=" + self.conf.encode() + b"\0"
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open("/proc/%s/environ" % entry, "rb") as f:
                    if mark not in b"\0" + f.read() + b"\0":
                        continue
                os.kill(int(entry), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass

    def _logs(self):
        if self.dir is None:
            return ""
        parts = []
        for name in sorted(os.listdir(self.path("log"))):
            parts.append("\n--- %s (last lines) ---\n%s" % (name, _tail(self.path("log", name))))
        return "".join(parts)
