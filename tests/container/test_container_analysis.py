"""Issue 9, part 3 (c): the real handshake and result cross the container
boundary with no copy. `tessera pipeline --analysis container` runs
tessera-analyze through scripts/analyze-in-container.sh (bwrap, only the
Shared directory bound); while it runs, the analysis process's
/proc/PID/smaps_rollup is sampled from the host. Checks: the answer equals the
in-process CG's, the analysis lived in another PID namespace, its private
dirty memory stays far below the edge arrays (a copy would add their full
size) while its shared mapping covers them. Prints the numbers. Skips (77)
without bwrap or tessera-analyze.
Usage: test_container_analysis.py BUILD_DIR SOURCE_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish  # noqa: E402

build, source = sys.argv[1], sys.argv[2]
tessera = os.path.join(build, "tessera")
analyze = os.path.join(build, "tessera-analyze")
box = os.path.join(source, "scripts", "analyze-in-container.sh")
if not shutil.which("bwrap") or not os.access(analyze, os.X_OK):
    print("SKIP: needs bwrap (apt-get install bubblewrap) and a built tessera-analyze")
    sys.exit(77)
if subprocess.run([box, "/tmp", "--", "true"], capture_output=True).returncode != 0:
    print("SKIP: bwrap cannot create namespaces here")
    sys.exit(77)

def rollup(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if rest.strip().endswith("kB"):
                    fields[key] = int(rest.split()[0]) * 1024
    except OSError:
        return None
    return fields


def analysis_pids(shm):
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = open(f"/proc/{entry}/cmdline").read().split("\0")
        except OSError:
            continue
        if argv and argv[0].endswith("tessera-analyze") and any(shm in a for a in argv):
            yield int(entry)


with tempfile.TemporaryDirectory(prefix="tessera-container-") as work:
    shm = os.path.join(work, "shared")
    os.mkdir(shm)
    env = dict(os.environ, TESSERA_SHM_DIR=shm)
    graph = ["--scale", "17", "--solver", "tessera", "--tolerance", "1e-12"]
    ref = subprocess.run([tessera, "pipeline", *graph, "--json", "-q"], capture_output=True, text=True, env=env)
    check(ref.returncode == 0, f"in-process pipeline: {ref.stderr}")
    samples = []
    done = threading.Event()

    def sample():
        while not done.is_set():
            for pid in analysis_pids(shm):
                r = rollup(pid)
                if r:
                    samples.append((pid, r))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    run = subprocess.run([tessera, "pipeline", *graph, "--json", "-q", "--analysis", "container",
                          "--analysis-launcher", f"{box} SHMDIR --"], capture_output=True, text=True, env=env)
    done.set()
    sampler.join()
    check(run.returncode == 0, f"container pipeline: exit {run.returncode}: {run.stderr}")
    if run.returncode == 0 and ref.returncode == 0:
        a, b = json.loads(ref.stdout), json.loads(run.stdout)
        h = b["hitting"]
        check(h["analysis"] == "container" and h["converged"], f"container run: {h}")
        check(abs(h["mean"] - a["hitting"]["mean"]) <= 1e-12 * abs(a["hitting"]["mean"]) and
              h["max"] == a["hitting"]["max"], f"container answer {h['mean']} differs from in-process {a['hitting']['mean']}")
        edges = b["edge_array_bytes"]
        check(len(samples) > 0, "the sandboxed tessera-analyze was never seen")
        if samples:
            private = max(s["Private_Dirty"] for _, s in samples)
            pss = max(s["Pss"] for _, s in samples)
            shared = max(s.get("Shared_Clean", 0) + s.get("Shared_Dirty", 0) for _, s in samples)
            anon = max(s.get("Anonymous", 0) for _, s in samples)
            mib = lambda x: x / 2**20
            print(f"edge arrays {mib(edges):.1f} MiB; analysis side (max over {len(samples)} samples): "
                  f"Private_Dirty {mib(private):.1f} MiB, Anonymous {mib(anon):.1f} MiB, Pss {mib(pss):.1f} MiB, "
                  f"Shared {mib(shared):.1f} MiB")
            hs = h["handshake"]
            print(f"handshake: launch {hs['launch_seconds'] * 1e3:.0f} ms (bwrap + mpirun singleton + attach), "
                  f"request->start {hs['request_to_start_seconds'] * 1e6:.1f} us, "
                  f"result->resume {hs['result_to_resume_seconds'] * 1e6:.1f} us")
            # No copy: private memory below half of the smallest copy of the
            # matrix (CRS: a 64-bit column and a value an arc). The edge
            # arrays (4 bytes an arc) are mapped, never private.
            crs = 16 * b["lcc"]["arcs"]
            check(private < crs / 2, f"analysis Private_Dirty {private} is not far below a CRS copy {crs} "
                                     f"(edge arrays {edges})")
            check(shared > edges / 2, f"analysis Shared {shared} does not cover the edge arrays {edges}")
    left = os.listdir(shm)
    check(not left, f"files left in the Shared directory: {left}")

finish()
