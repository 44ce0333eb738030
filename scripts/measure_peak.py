#!/usr/bin/env python3
"""The peak memory of a Tessera job on this node, measured from outside:
what the memory guardrail (docs/memory.md) estimates before a command runs.

    scripts/measure_peak.py [--json] [--interval S] -- tessera -n 2 pipeline --scale 20

Every few milliseconds it adds up, over the job's ranks (the processes below
this one that carry OMPI_COMM_WORLD_RANK):

- anonymous memory (RssAnon of /proc/PID/status): heap, vectors, buffers;
- the Shared directory's files (TESSERA_SHM_DIR, made private to the run
  unless given: st_blocks of every file, so space reserved and not yet
  touched counts too);
- node-shared memfd segments the ranks hold (co-locale arrays, same-node
  rings, Afforest's node-shared parents), each once.

The peak of that sum is the job's memory on the node. Library code and
file pages are left out: they are page cache, not what the node must find
free. Σ VmHWM (each rank's peak resident set, which counts the Shared pages
a rank maps, once per rank that maps them) is printed beside it.

As a module: ``Sampler(root_pid, shm_dir)`` samples in a thread
(``start``, ``mark(name)``, ``stop``); ``measure(argv)`` runs a command.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def _children_map():
    """{ppid: [pid, ...]} of every process."""
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        rest = stat[stat.rfind(b")") + 2:].split()
        kids.setdefault(int(rest[1]), []).append(int(name))
    return kids


def _descendants(root):
    kids = _children_map()
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for c in kids.get(p, ()):
            out.append(c)
            todo.append(c)
    return out


def _is_rank(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
        return b"OMPI_COMM_WORLD_RANK=" in env or b"PMI_RANK=" in env
    except OSError:
        return False


def _status(pid):
    """(RssAnon, VmHWM) in bytes, or None when the process is gone."""
    anon = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    anon = int(line.split()[1]) * 1024
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
    except OSError:
        return None
    return anon, hwm


def dir_bytes(path):
    """Bytes allocated to the files under `path` (st_blocks: reserved space too)."""
    total = 0
    try:
        with os.scandir(path) as it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        total += dir_bytes(e.path)
                    else:
                        total += e.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    pass
    except OSError:
        pass
    return total


class Sampler:
    """Samples the ranks below `root` (a pid) in a thread."""

    def __init__(self, root, shm_dir, interval=0.005):
        self.root, self.shm_dir, self.interval = root, shm_dir, interval
        self.ranks = {}       # pid -> last (anon, hwm)
        self.not_ranks = {}   # pid -> its command line when it was found not to be a rank
        self.memfds = {}      # (pid, address range) -> inode, refreshed now and then
        self.peak = {"total": 0, "anon": 0, "shared": 0, "memfd": 0}
        self.at_peak = {}
        self.marks = []       # (name, peak since the previous mark)
        self._since = dict(self.peak)
        self.hwm = {}         # pid -> VmHWM last seen
        self.samples = 0
        self._stop = threading.Event()
        self._thread = None

    def _refresh(self):
        for pid in _descendants(self.root):
            if pid in self.ranks:
                continue
            # A launcher's child is looked at again once it has exec'd (its
            # command line changed): between fork and exec it has the
            # launcher's environment, not the rank's.
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if self.not_ranks.get(pid) == cmdline:
                continue
            if _is_rank(pid):
                self.ranks[pid] = (0, 0)
            else:
                self.not_ranks[pid] = cmdline
        memfds = {}
        for pid in list(self.ranks):
            # Mapped, their descriptors often closed: found in the maps and
            # sized through map_files (st_blocks: the pages they hold).
            try:
                with open(f"/proc/{pid}/maps") as f:
                    for line in f:
                        if "/memfd:tessera" in line:
                            fields = line.split()
                            memfds[(pid, fields[0])] = fields[4]
            except OSError:
                pass
        self.memfds = memfds

    def sample(self):
        anon = 0
        for pid in list(self.ranks):
            s = _status(pid)
            if s is None:
                continue
            self.ranks[pid] = s
            self.hwm[pid] = max(self.hwm.get(pid, 0), s[1])
            anon += s[0]
        shared = dir_bytes(self.shm_dir) if self.shm_dir else 0
        memfd, seen = 0, set()
        for (pid, where) in list(self.memfds):
            try:
                st = os.stat(f"/proc/{pid}/map_files/{where}")
            except OSError:
                continue
            if st.st_ino in seen:
                continue
            seen.add(st.st_ino)
            memfd += st.st_blocks * 512
        total = anon + shared + memfd
        self.samples += 1
        now = {"total": total, "anon": anon, "shared": shared, "memfd": memfd}
        if total > self.peak["total"]:
            self.at_peak = dict(now)
        for k, v in now.items():
            self.peak[k] = max(self.peak[k], v)
            self._since[k] = max(self._since[k], v)
        self.now = now

    def _run(self):
        tick = 0
        while not self._stop.is_set():
            if tick % 4 == 0:
                self._refresh()
            self.sample()
            tick += 1
            self._stop.wait(self.interval)

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def mark(self, name):
        """The peak since the previous mark, recorded under `name`; restarts it."""
        self.sample()
        self.marks.append((name, dict(self._since)))
        self._since = dict(getattr(self, "now", {"total": 0, "anon": 0, "shared": 0, "memfd": 0}))
        return self.marks[-1][1]

    def current(self):
        self.sample()
        return dict(self.now)

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join()
        return self.result()

    def result(self):
        return {"peak_bytes": self.peak["total"], "peak_anon_bytes": self.peak["anon"],
                "peak_shared_bytes": self.peak["shared"], "peak_memfd_bytes": self.peak["memfd"],
                "at_peak": self.at_peak, "ranks": len(self.ranks), "sum_vmhwm_bytes": sum(self.hwm.values()),
                "samples": self.samples, "marks": [{"name": n, **p} for n, p in self.marks]}


def measure(argv, env=None, shm_dir=None, interval=0.005, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
    """Runs argv with a private Shared directory (unless `shm_dir`); the
    Sampler's result with the command's exit code, stdout, stderr and seconds."""
    own = shm_dir is None
    if own:
        shm_dir = tempfile.mkdtemp(prefix="tessera-measure-", dir="/dev/shm")
    env = dict(os.environ if env is None else env)
    env["TESSERA_SHM_DIR"] = shm_dir
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr)
        s = Sampler(p.pid, shm_dir, interval).start()
        out, err = p.communicate()
        r = s.stop()
    finally:
        if own:
            shutil.rmtree(shm_dir, ignore_errors=True)
    r.update(returncode=p.returncode, seconds=time.monotonic() - t0,
             stdout=out.decode(errors="replace") if isinstance(out, bytes) else out,
             stderr=err.decode(errors="replace") if isinstance(err, bytes) else err)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--interval", type=float, default=0.005, help="seconds between samples")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("name a command")
    r = measure(cmd, interval=a.interval)
    sys.stderr.write(r.pop("stderr"))
    out = r.pop("stdout")
    if a.json:
        print(json.dumps(r))
    else:
        sys.stdout.write(out)
        mib = 1 << 20
        print(f"peak {r['peak_bytes'] / mib:.1f} MiB on this node over {r['ranks']} ranks (anonymous "
              f"{r['at_peak'].get('anon', 0) / mib:.1f}, Shared {r['at_peak'].get('shared', 0) / mib:.1f}, memfd "
              f"{r['at_peak'].get('memfd', 0) / mib:.1f} at the peak); sum of VmHWM {r['sum_vmhwm_bytes'] / mib:.1f} "
              f"MiB; {r['samples']} samples in {r['seconds']:.1f} s", file=sys.stderr)
    return r["returncode"]


if __name__ == "__main__":
    sys.exit(main())
