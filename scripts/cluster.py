#!/usr/bin/env python3
"""An emulated cluster on one machine: N nodes, each a process tree in its own
mount, UTS, IPC and PID namespaces (its own hostname, /proc and an empty
tmpfs on /dev/shm), sharing the network namespace: nodes talk TCP over `lo`.

    cluster.py up   --dir D --nodes N [--shm-size 256M] [--slots K] [--owner PID]
    cluster.py exec --dir D NODE -- CMD...     run CMD inside NODE (node0, node1, ...)
    cluster.py rsh  [--dir D] NODE CMD...      the ssh stand-in Open MPI calls (plm_rsh_agent)
    cluster.py kill --dir D NODE               kill a node's whole process tree (a lost node)
    cluster.py down --dir D                    tear everything down; nothing is left

`up` writes D/env.sh (the Open MPI settings: source it, then run `mpirun`
inside node0), D/hostfile and D/nodes.json, and makes D/tmp, the nodes'
Open MPI session directories (a node's own /tmp on a cluster: a lost
node's stay there, and go with the cluster, not into the machine's /tmp).
It leaves a supervisor running outside the namespaces: it owns the nodes,
serves the rsh stand-in and tears the cluster down when its owner (the
process that ran `up`, or --owner PID; 0 = none) exits, so a test killed on
a timeout leaves nothing. If the supervisor itself is killed, every node
dies with it (PR_SET_PDEATHSIG).

Where namespaces are not permitted, `up` exits 77 (the ctest skip code) with
the reason. Python 3 standard library only.
"""
import argparse
import array
import ctypes
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

SKIP = 77
HERE = os.path.abspath(__file__)
PR_SET_PDEATHSIG = 1
# The environment a remote command gets, as ssh gives a login shell: the
# variables a cluster user's shell profile would set, not the caller's.
REMOTE_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "TMPDIR", "LD_LIBRARY_PATH")


def fail(msg, code=1):
    print(f"cluster.py: {msg}", file=sys.stderr)
    sys.exit(code)


def libc():
    return ctypes.CDLL(None, use_errno=True)


def set_pdeathsig(sig=signal.SIGKILL):
    if libc().prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def start_time(pid):
    """The kernel's start time of `pid` (field 22 of /proc/PID/stat), or None:
    with the pid it names a process unambiguously (pids are reused)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid, started):
    return pid > 0 and started is not None and start_time(pid) == started


def ns_inode(pid, kind):
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def userns_needed():
    return os.geteuid() != 0


def unshare_argv(userns):
    argv = ["unshare", "--mount", "--uts", "--ipc", "--pid", "--fork", "--propagation", "private", "--kill-child"]
    if userns:
        argv[1:1] = ["--user", "--map-root-user"]
    return argv


def nsenter_argv(pid, userns):
    argv = ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-p"]
    if userns:
        argv += ["-U", "--preserve-credentials"]
    return argv


def probe_namespaces(userns):
    """None when this process may create the nodes, else the reason."""
    for tool in ("unshare", "nsenter"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ.get("PATH", "").split(":") if d):
            return f"{tool} (util-linux) is not installed"
    try:
        r = subprocess.run(unshare_argv(userns) + ["sh", "-c", "mount -t tmpfs -o size=1M tmpfs /dev/shm && hostname tessera-probe"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run unshare: {e}"
    if r.returncode != 0:
        how = "as root" if not userns else "with an unprivileged user namespace (not root)"
        return (f"cannot create mount/UTS/IPC/PID namespaces {how}: "
                + (r.stderr.strip().splitlines() or ["unshare failed"])[-1])
    return None


# ---- inside a node ---------------------------------------------------------

def node_init(hostname, shm_size, ready_fd):
    """PID 1 of a node: name the node, give it its own /proc and /dev/shm,
    report its pid outside the namespace, then reap orphans until killed."""
    set_pdeathsig()
    try:
        host_pid = None
        with open("/proc/self/status") as f:  # still the machine's /proc here
            for line in f:
                if line.startswith("NSpid:"):
                    host_pid = int(line.split()[1])
        subprocess.run(["hostname", hostname], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={shm_size},mode=1777", "tmpfs", "/dev/shm"], check=True)
        subprocess.run(["mount", "-t", "proc", "proc", "/proc"], check=True)
        os.write(ready_fd, f"ok {host_pid}\n".encode())
    except Exception as e:  # noqa: BLE001 - reported to the supervisor verbatim
        os.write(ready_fd, f"error {e}\n".encode())
        sys.exit(1)
    os.close(ready_fd)
    for fd in (0, 1, 2):
        try:
            os.dup2(os.open("/dev/null", os.O_RDWR), fd)
        except OSError:
            pass
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Orphans are reparented to PID 1 at any time, also after a moment with
    # no children at all: wait for SIGCHLD, then reap everything that ended.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        signal.sigtimedwait({signal.SIGCHLD}, 5)


# ---- the supervisor (outside the namespaces) -------------------------------

class Supervisor:
    def __init__(self, d, nodes, shm_size, slots, owner_fd, cid):
        self.dir, self.count, self.shm_size, self.slots = d, nodes, shm_size, slots
        self.owner_fd, self.id = owner_fd, cid
        self.userns = userns_needed()
        self.nodes = []  # dicts: name, hostname, pid, started, unshare (Popen)
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def start_nodes(self):
        for i in range(self.count):
            r, w = os.pipe()
            hostname = f"t{self.id}-n{i}"
            p = subprocess.Popen(unshare_argv(self.userns) + [sys.executable, HERE, "_init", hostname, self.shm_size, str(w)],
                                 pass_fds=(w,), stdin=subprocess.DEVNULL, preexec_fn=set_pdeathsig)
            os.close(w)
            with os.fdopen(r) as f:
                line = f.readline().split(None, 1)
            if not line or line[0] != "ok":
                raise RuntimeError(f"node{i} did not start: {line[1].strip() if len(line) > 1 else 'no report'}")
            pid = int(line[1])
            self.nodes.append({"name": f"node{i}", "hostname": hostname, "pid": pid, "started": start_time(pid),
                               "mnt": ns_inode(pid, "mnt"), "proc": p, "alive": True})

    def write_files(self):
        d = self.dir
        os.makedirs(os.path.join(d, "tmp"), mode=0o700, exist_ok=True)
        with open(os.path.join(d, "hostfile"), "w") as f:
            for n in self.nodes:
                f.write(f"{n['hostname']} slots={self.slots}\n")
        env = cluster_env(d)
        with open(os.path.join(d, "env.sh"), "w") as f:
            f.write("# Written by scripts/cluster.py up: source it before mpirun/tessera inside node0.\n")
            for k, v in env.items():
                f.write(f"export {k}={shlex.quote(v)}\n")
        self.save()

    def save(self):
        info = {"id": self.id, "dir": self.dir, "supervisor": {"pid": os.getpid(), "started": start_time(os.getpid())},
                "userns": self.userns, "slots": self.slots, "shm_size": self.shm_size,
                "nodes": [{k: n[k] for k in ("name", "hostname", "pid", "started", "mnt", "alive")} for n in self.nodes]}
        tmp = os.path.join(self.dir, "nodes.json.tmp")
        with open(tmp, "w") as f:
            json.dump(info, f, indent=1)
        os.replace(tmp, os.path.join(self.dir, "nodes.json"))

    def node(self, name):
        for n in self.nodes:
            if name in (n["name"], n["hostname"]):
                return n
        return None

    # The rsh stand-in: the client passes its stdin/stdout/stderr over the
    # socket; the command runs in the node with them, as sshd would run it,
    # and dies when the client does (as a remote command does when ssh dies).
    def serve_rsh(self, conn):
        try:
            cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            uid = int.from_bytes(cred[4:8], sys.byteorder)
            if uid != os.geteuid():
                return
            msg, fds = recv_fds(conn)
            req = json.loads(msg)
            with self.lock:
                n = self.node(req["node"])
            if n is None or not alive(n["pid"], n["started"]):
                reply(conn, 255, f"cluster.py rsh: no running node named {req['node']!r} in {self.dir}\n")
                return
            env = {k: v for k, v in req["env"].items() if k in REMOTE_ENV_KEEP}
            env.update(cluster_env(self.dir))
            cwd = req.get("cwd") or "/"
            argv = nsenter_argv(n["pid"], self.userns) + ["--wd=" + cwd, "--", "/bin/sh", "-c", req["cmd"]]
            p = subprocess.Popen(argv, stdin=fds[0], stdout=fds[1], stderr=fds[2], env=env, start_new_session=True)
            for fd in fds:
                os.close(fd)
            conn.settimeout(0.2)
            while p.poll() is None:
                try:
                    if conn.recv(1) == b"":
                        break  # the client died
                except socket.timeout:
                    pass
                except OSError:
                    break
            if p.poll() is None:
                killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(2)
                except subprocess.TimeoutExpired:
                    killpg(p.pid, signal.SIGKILL)
                    p.wait()
                return
            reply(conn, p.returncode if p.returncode >= 0 else 128 - p.returncode, "")
        except Exception as e:  # noqa: BLE001 - one session's failure must not end the supervisor
            try:
                reply(conn, 255, f"cluster.py rsh: {e}\n")
            except OSError:
                pass
        finally:
            conn.close()

    def serve(self, listener):
        listener.settimeout(0.5)
        while not self.stopping.is_set():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                self.check()
                continue
            conn.settimeout(None)
            threading.Thread(target=self.serve_rsh, args=(conn,), daemon=True).start()

    def check(self):
        import select
        if self.owner_fd is not None and select.select([self.owner_fd], [], [], 0)[0]:
            self.stopping.set()  # the owner exited
        changed = False
        with self.lock:
            for n in self.nodes:
                if n["alive"] and n["proc"].poll() is not None:
                    n["alive"] = False
                    changed = True
        if changed:
            self.save()

    def teardown(self):
        for n in self.nodes:
            if alive(n["pid"], n["started"]):
                try:
                    os.kill(n["pid"], signal.SIGKILL)  # PID 1 of the node: the kernel kills the whole node
                except ProcessLookupError:
                    pass
        for n in self.nodes:
            try:
                n["proc"].wait(10)
            except subprocess.TimeoutExpired:
                n["proc"].kill()
            n["alive"] = False


def killpg(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def send_fds(sock, msg, fds):
    sock.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def recv_fds(sock):
    fds = array.array("i")
    data, anc, _, _ = sock.recvmsg(1 << 20, socket.CMSG_LEN(3 * fds.itemsize))
    for level, typ, payload in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if len(fds) != 3:
        raise RuntimeError("rsh client sent no stdin/stdout/stderr")
    return data.decode(), list(fds)


def reply(conn, code, text):
    conn.sendall(json.dumps({"rc": code, "err": text}).encode() + b"\n")


def cluster_env(d):
    """What every command run in the cluster needs (D/env.sh)."""
    return {
        "TESSERA_CLUSTER_DIR": d,
        "OMPI_MCA_plm_rsh_agent": f"{sys.executable} {HERE} rsh",
        # Every orted is started from node0: a remote node cannot enter its
        # sibling's namespaces, only the supervisor outside can.
        "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
        "OMPI_MCA_oob_tcp_if_include": "lo",
        "OMPI_MCA_btl_tcp_if_include": "lo",
        "OMPI_MCA_btl": "self,vader,tcp",
        "OMPI_MCA_orte_default_hostfile": os.path.join(d, "hostfile"),
        "OMPI_MCA_orte_tmpdir_base": os.path.join(d, "tmp"),
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_mpi_yield_when_idle": "1",
    }


def supervise(d, nodes, shm_size, slots, owner_fd, cid, status_w):
    os.setsid()
    log = os.open(os.path.join(d, "supervisor.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sup = Supervisor(d, nodes, shm_size, slots, owner_fd, cid)
    signal.signal(signal.SIGTERM, lambda *_: sup.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: sup.stopping.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sock_path = os.path.join(d, "rsh.sock")
    try:
        if os.path.exists(sock_path):
            os.unlink(sock_path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.getcwd()
        os.chdir(d)  # a relative name: D may be longer than sun_path allows
        old_mask = os.umask(0o177)
        listener.bind("rsh.sock")
        os.umask(old_mask)
        os.chdir(old)
        listener.listen(64)
        sup.start_nodes()
        sup.write_files()
    except Exception as e:  # noqa: BLE001 - reported to `up`
        sup.teardown()
        os.write(status_w, f"error {e}\n".encode())
        os._exit(1)
    os.write(status_w, b"ok\n")
    os.close(status_w)
    try:
        sup.serve(listener)
    finally:
        sup.teardown()
        listener.close()
        for name in ("rsh.sock", "env.sh", "hostfile"):
            try:
                os.unlink(os.path.join(d, name))
            except FileNotFoundError:
                pass
        shutil.rmtree(os.path.join(d, "tmp"), ignore_errors=True)
        sup.save()
        print(f"cluster {cid} down", flush=True)
    os._exit(0)


# ---- commands ----------------------------------------------------------------

def load(d):
    try:
        with open(os.path.join(d, "nodes.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def running(info):
    return info is not None and alive(info["supervisor"]["pid"], info["supervisor"]["started"])


def cmd_up(a):
    d = os.path.abspath(a.dir)
    os.makedirs(d, exist_ok=True)
    if running(load(d)):
        fail(f"a cluster is already running in {d} (scripts/cluster.py down --dir {d})")
    if a.nodes < 1:
        fail("--nodes must be at least 1")
    reason = probe_namespaces(userns_needed())
    if reason:
        fail(f"skipped: {reason}", SKIP)
    owner = os.getppid() if a.owner is None else a.owner
    owner_fd = None
    if owner > 0:
        try:
            owner_fd = os.pidfd_open(owner)
        except OSError as e:
            fail(f"cannot watch the owner process {owner}: {e}")
    cid = secrets.token_hex(3)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        if os.fork() != 0:
            os._exit(0)
        try:
            supervise(d, a.nodes, a.shm_size, a.slots, owner_fd, cid, w)
        except BaseException as e:  # noqa: BLE001
            os.write(w, f"error {e}\n".encode())
        os._exit(1)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        status = f.readline().strip()
    if status != "ok":
        fail(f"cannot start the cluster: {status[6:] if status.startswith('error') else 'the supervisor died'} "
             f"(see {d}/supervisor.log)")
    info = load(d)
    print(f"cluster {cid}: {', '.join(n['name'] + '=' + n['hostname'] for n in info['nodes'])}; "
          f"source {d}/env.sh, then run mpirun inside node0")


def node_of(info, d, name):
    if info is None:
        fail(f"no cluster in {d} (scripts/cluster.py up --dir {d} --nodes N)")
    for n in info["nodes"]:
        if name in (n["name"], n["hostname"]):
            return n
    fail(f"no node {name!r} in {d}; nodes: {', '.join(n['name'] for n in info['nodes'])}")


def cmd_exec(a):
    d = os.path.abspath(a.dir)
    info = load(d)
    n = node_of(info, d, a.node)
    if not running(info) or not alive(n["pid"], n["started"]):
        fail(f"node {a.node} of the cluster in {d} is not running")
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        fail("exec: no command given (exec --dir D NODE -- CMD...)")
    env = dict(os.environ)
    env.update(cluster_env(d))
    argv = nsenter_argv(n["pid"], info.get("userns", False)) + ["--wd=" + os.getcwd(), "--"] + cmd
    os.execvpe(argv[0], argv, env)


def cmd_rsh(a):
    d = a.dir or os.environ.get("TESSERA_CLUSTER_DIR")
    if not d:
        fail("rsh: no cluster: give --dir D or set TESSERA_CLUSTER_DIR (source D/env.sh)", 255)
    # ssh options Open MPI may put before the host (as it would for ssh -x).
    args = list(a.rest)
    while args and args[0].startswith("-"):
        args.pop(0)
    if len(args) < 2:
        fail("rsh: usage: cluster.py rsh NODE CMD...", 255)
    node, cmd = args[0], " ".join(args[1:])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.getcwd()
    try:
        os.chdir(d)
        s.connect("rsh.sock")
    except OSError as e:
        fail(f"rsh: the cluster in {d} is not running: {e}", 255)
    finally:
        os.chdir(old)
    send_fds(s, json.dumps({"node": node, "cmd": cmd, "cwd": old, "env": dict(os.environ)}).encode(), [0, 1, 2])
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            fail(f"rsh: lost the connection to the cluster supervisor in {d}", 255)
        data += chunk
    res = json.loads(data)
    if res["err"]:
        sys.stderr.write(res["err"])
    sys.exit(res["rc"])


def cmd_kill(a):
    d = os.path.abspath(a.dir)
    info = load(d)
    n = node_of(info, d, a.node)
    if alive(n["pid"], n["started"]):
        os.kill(n["pid"], signal.SIGKILL)  # PID 1 of its namespace: the kernel kills every process in it
    deadline = time.time() + 10
    while alive(n["pid"], n["started"]) and time.time() < deadline:
        time.sleep(0.05)
    if alive(n["pid"], n["started"]):
        fail(f"node {a.node} (pid {n['pid']}) did not die")


def leftovers(info):
    """Processes still in one of the cluster's mount namespaces."""
    mnts = {n["mnt"] for n in info["nodes"] if n.get("mnt")}
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit() and ns_inode(p, "mnt") in mnts:
            found.append(int(p))
    return found


def cmd_down(a):
    d = os.path.abspath(a.dir)
    info = load(d)
    if info is None:
        return
    sup = info["supervisor"]
    if alive(sup["pid"], sup["started"]):
        os.kill(sup["pid"], signal.SIGTERM)
        deadline = time.time() + 15
        while alive(sup["pid"], sup["started"]) and time.time() < deadline:
            time.sleep(0.05)
    # The supervisor may have been killed: end the nodes ourselves.
    for n in info["nodes"]:
        if alive(n["pid"], n["started"]):
            os.kill(n["pid"], signal.SIGKILL)
    deadline = time.time() + 10
    while time.time() < deadline and (leftovers(info) or any(alive(n["pid"], n["started"]) for n in info["nodes"])):
        time.sleep(0.05)
    left = leftovers(info)
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for name in ("rsh.sock", "env.sh", "hostfile", "nodes.json"):
        try:
            os.unlink(os.path.join(d, name))
        except FileNotFoundError:
            pass
    shutil.rmtree(os.path.join(d, "tmp"), ignore_errors=True)
    if left:
        fail(f"down: processes {left} were still in the cluster's namespaces; killed them")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_init":
        node_init(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "rsh":
        # Parsed by hand: what follows the node is the remote command verbatim.
        rest = sys.argv[2:]
        d = None
        if len(rest) >= 2 and rest[0] == "--dir":
            d, rest = rest[1], rest[2:]
        cmd_rsh(argparse.Namespace(dir=d, rest=rest))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up", help="start N nodes")
    p.add_argument("--dir", required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--shm-size", default="256M", help="size of each node's /dev/shm tmpfs")
    p.add_argument("--slots", type=int, default=2, help="slots per node in the hostfile (ranks mpirun puts on a node)")
    p.add_argument("--owner", type=int, default=None,
                   help="tear the cluster down when this pid exits (default: the caller of up; 0: only on down)")
    p = sub.add_parser("exec", help="run a command inside a node")
    p.add_argument("--dir", required=True)
    p.add_argument("node")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p = sub.add_parser("rsh", help="the ssh stand-in for Open MPI (plm_rsh_agent)")
    p.add_argument("--dir")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("kill", help="kill a node's whole process tree")
    p.add_argument("--dir", required=True)
    p.add_argument("node")
    p = sub.add_parser("down", help="tear the cluster down")
    p.add_argument("--dir", required=True)
    a = ap.parse_args()
    {"up": cmd_up, "exec": cmd_exec, "rsh": cmd_rsh, "kill": cmd_kill, "down": cmd_down}[a.command](a)


if __name__ == "__main__":
    main()
