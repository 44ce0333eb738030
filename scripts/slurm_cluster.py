#!/usr/bin/env python3
"""Slurm on the emulated cluster: scripts/cluster.py's nodes, slurmctld on
node0 and one slurmd inside every node (each under its node's own hostname,
so no --enable-multiple-slurmd build is needed; the nodes share the network,
so every slurmd listens on its own port, NodeName=... Port=).

    slurm_cluster.py up   --dir D --nodes N [--cpus C] [--shm-size 256M] [--owner PID]
    slurm_cluster.py exec --dir D NODE -- CMD...     CMD inside NODE with SLURM_CONF set
    slurm_cluster.py down --dir D                    stop Slurm and the nodes; nothing is left

`up` starts the nodes (cluster.py up), writes D/slurm/slurm.conf and
D/slurm.env (`export SLURM_CONF=...`; source it with D/env.sh), starts the
daemons and waits until every node is idle. Then, e.g.

    slurm_cluster.py exec --dir D node0 -- srun -N 2 -n 4 tessera bench isx
    slurm_cluster.py exec --dir D node0 -- sbatch --wait job.sh

Open MPI 4.1 of Debian starts under srun through PMIx only (MpiDefault=pmix;
--mpi=pmi2 and --mpi=none are refused by its ess component).

Settings chosen for one machine: auth/none and cred/none (no munge daemon to
run; only for a cluster on one host), proctrack/pgid and task/none (no
cgroups needed), TmpFS=D/slurm/tmp-%n (the PMIx plugin puts its per-step
directory there: one /tmp shared by the nodes would collide), and
SlurmdParameters=config_overrides with CPUs=C per node (default 2), so a
node never drains for having fewer cores than configured ranks.

Where Slurm or namespaces are missing, `up` exits 77 with the reason.
Python 3 standard library only; cluster.py is found beside this file or at
$TESSERA_CLUSTER_PY.
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

SKIP = 77
HERE = os.path.abspath(__file__)
DAEMONS = ("slurmctld", "slurmd", "srun", "sbatch", "sinfo")
PR_SET_CHILD_SUBREAPER = 36


def fail(msg, code=1):
    print(f"slurm_cluster.py: {msg}", file=sys.stderr)
    sys.exit(code)


def cluster_py():
    path = os.environ.get("TESSERA_CLUSTER_PY") or os.path.join(os.path.dirname(HERE), "cluster.py")
    if not os.path.isfile(path):
        fail(f"skipped: the emulated cluster (scripts/cluster.py) is not at {path}", SKIP)
    return [sys.executable, path]


def conf_path(d):
    return os.path.join(d, "slurm", "slurm.conf")


def free_ports(count):
    """Ports free on lo now. Held open together so they differ; a daemon may
    still lose one to another process before it binds (then up fails)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_conf(d, cluster_id, hosts, cpus):
    sd = os.path.join(d, "slurm")
    ctld_port, *node_ports = free_ports(1 + len(hosts))
    os.makedirs(os.path.join(sd, "state"), exist_ok=True)
    for h in hosts:
        os.makedirs(os.path.join(sd, f"spool-{h}"), exist_ok=True)
        os.makedirs(os.path.join(sd, f"tmp-{h}"), exist_ok=True)
    lines = [
        "# Written by scripts/slurm_cluster.py up: Slurm on the emulated cluster of this directory.",
        f"ClusterName=t{cluster_id}",
        f"SlurmctldHost={hosts[0]}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={node_ports[0]}",
        "AuthType=auth/none",
        "CredType=cred/none",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={sd}/state",
        f"SlurmdSpoolDir={sd}/spool-%n",
        f"TmpFS={sd}/tmp-%n",
        f"SlurmctldPidFile={sd}/slurmctld.pid",
        f"SlurmdPidFile={sd}/slurmd-%n.pid",
        f"SlurmctldLogFile={sd}/slurmctld.log",
        f"SlurmdLogFile={sd}/slurmd-%n.log",
        "SlurmdParameters=config_overrides",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=pmix",
        "ReturnToService=2",
        "SchedulerType=sched/builtin",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "KillWait=5",
    ]
    for h, port in zip(hosts, node_ports):
        lines.append(f"NodeName={h} NodeAddr=127.0.0.1 Port={port} CPUs={cpus} Sockets=1 CoresPerSocket={cpus} "
                     f"ThreadsPerCore=1 State=UNKNOWN")
    lines.append("PartitionName=tessera Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    with open(conf_path(d), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(d, "slurm.env"), "w") as f:
        f.write(f"# Written by scripts/slurm_cluster.py up: source it with env.sh.\nexport SLURM_CONF={conf_path(d)}\n")


def reaper(argv):
    """Runs argv as a child and reaps every orphan below it until all are
    gone: slurmd's step daemons and srun's helpers detach, and the node's
    PID 1 is not theirs to reap."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        fail(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
    main = subprocess.Popen(argv)
    signal.signal(signal.SIGTERM, lambda *_: main.terminate())
    status = None
    while True:
        try:
            pid, st = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == main.pid:
            status = os.waitstatus_to_exitcode(st)
    sys.exit(status if status is not None and status >= 0 else 1)


def start_daemon(d, node, argv, log):
    """argv inside `node` under reaper(), detached from this process."""
    with open(log, "ab") as out:
        subprocess.Popen(cluster_py() + ["exec", "--dir", d, node, "--", sys.executable, HERE, "_reap", *argv],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)


def node_states(d):
    p = subprocess.run(cluster_py() + ["exec", "--dir", d, "node0", "--", "sinfo", "-h", "-N", "-o", "%N %T"],
                       capture_output=True, text=True, env=dict(os.environ, SLURM_CONF=conf_path(d)), timeout=30)
    return dict(line.split() for line in p.stdout.splitlines() if len(line.split()) == 2) if p.returncode == 0 else {}


def cmd_up(a):
    d = os.path.abspath(a.dir)
    missing = [t for t in DAEMONS if shutil.which(t) is None]
    if missing:
        fail(f"skipped: Slurm is not installed ({', '.join(missing)} missing; apt-get install slurm-wlm)", SKIP)
    owner = os.getppid() if a.owner is None else a.owner
    up = subprocess.run(cluster_py() + ["up", "--dir", d, "--nodes", str(a.nodes), "--shm-size", a.shm_size,
                                        "--slots", str(a.cpus), "--owner", str(owner)], capture_output=True, text=True)
    if up.returncode != 0:
        sys.stderr.write(up.stderr)
        sys.exit(up.returncode)
    with open(os.path.join(d, "nodes.json")) as f:
        info = json.load(f)
    hosts = [n["hostname"] for n in info["nodes"]]
    write_conf(d, info["id"], hosts, a.cpus)
    sd = os.path.join(d, "slurm")
    conf = conf_path(d)
    start_daemon(d, "node0", ["slurmctld", "-D", "-f", conf], os.path.join(sd, "slurmctld.out"))
    for i, h in enumerate(hosts):
        start_daemon(d, f"node{i}", ["slurmd", "-D", "-f", conf], os.path.join(sd, f"slurmd-{h}.out"))
    deadline = time.time() + a.timeout
    states = {}
    while time.time() < deadline:
        states = node_states(d)
        if len(states) == len(hosts) and all(s == "idle" for s in states.values()):
            break
        time.sleep(0.5)
    else:
        subprocess.run(cluster_py() + ["down", "--dir", d])
        fail(f"Slurm did not come up within {a.timeout} s (node states {states or 'unknown'}; "
             f"see {sd}/slurmctld.log and {sd}/slurmd-*.log)")
    print(f"slurm on cluster {info['id']}: {len(hosts)} nodes idle ({', '.join(hosts)}); "
          f"source {d}/env.sh and {d}/slurm.env, then run srun/sbatch inside node0")


def cmd_exec(a):
    d = os.path.abspath(a.dir)
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        fail("exec: no command given (exec --dir D NODE -- CMD...)")
    os.environ["SLURM_CONF"] = conf_path(d)
    argv = cluster_py() + ["exec", "--dir", d, a.node, "--", *cmd]
    os.execvp(argv[0], argv)


def cmd_down(a):
    # The daemons live inside the nodes: tearing the nodes down ends them.
    d = os.path.abspath(a.dir)
    p = subprocess.run(cluster_py() + ["down", "--dir", d])
    shutil.rmtree(os.path.join(d, "slurm"), ignore_errors=True)
    for name in ("slurm.env",):
        try:
            os.unlink(os.path.join(d, name))
        except FileNotFoundError:
            pass
    sys.exit(p.returncode)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_reap":
        reaper(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up", help="start N nodes with slurmctld and one slurmd each")
    p.add_argument("--dir", required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--cpus", type=int, default=2, help="CPUs Slurm gives each node (also its hostfile slots)")
    p.add_argument("--shm-size", default="256M", help="size of each node's /dev/shm tmpfs")
    p.add_argument("--owner", type=int, default=None,
                   help="tear the cluster down when this pid exits (default: the caller of up; 0: only on down)")
    p.add_argument("--timeout", type=float, default=30, help="seconds to wait for every node to be idle")
    p = sub.add_parser("exec", help="run a command inside a node with SLURM_CONF set")
    p.add_argument("--dir", required=True)
    p.add_argument("node")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p = sub.add_parser("down", help="stop Slurm and the nodes")
    p.add_argument("--dir", required=True)
    a = ap.parse_args()
    {"up": cmd_up, "exec": cmd_exec, "down": cmd_down}[a.command](a)


if __name__ == "__main__":
    main()
