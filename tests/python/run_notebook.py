"""Executes a notebook with nbclient, top to bottom, in an ipykernel running
this interpreter (the build's Python, with this process's PYTHONPATH), and
fails when any cell raises or writes to stderr (a warning, say), or leaves
a session running. Jupyter's files (the kernel spec, connection files,
IPython's profile) and the sessions' sockets and logs go to a temporary
directory, not $HOME or /tmp/tessera-UID; a session a failed notebook did
not stop is stopped here (its ranks would outlive the kernel). Exit 77 (skipped) when nbclient or ipykernel
is missing: the configure step could not pip-install them.

Usage: run_notebook.py NOTEBOOK.ipynb"""
import glob
import json
import os
import re
import sys
import tempfile
import time

import tessera

try:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from jupyter_client.manager import KernelManager
    import ipykernel  # noqa: F401 - the kernel the spec below starts
except ImportError as e:
    log = os.path.join(os.environ.get("TESSERA_BINARY_DIR", "build"), "python-deps", "jupyter-pip.log")
    print(f"SKIPPED: {e}: nbclient and ipykernel are pip-installed into build/python-deps/jupyter by the configure "
          f"step, which failed" + (f" (its pip's errors: {log})" if os.path.exists(log) else ""))
    sys.exit(77)


def stop_sessions(directory):
    """Stops the sessions still serving a socket in ``directory`` (a stopped
    one removes its socket); how many there were."""
    left = glob.glob(os.path.join(directory, "*.sock"))
    for path in left:
        try:
            tessera.connect(path, timeout=5).stop()
        except (OSError, tessera.Error) as e:
            print(f"could not stop the session at {path}: {e}")
    return len(left)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    nb = nbformat.read(sys.argv[1], as_version=4)
    name = nb.metadata.kernelspec.name
    with tempfile.TemporaryDirectory(prefix="tessera-jupyter-") as home:
        spec = os.path.join(home, "data", "kernels", name)
        os.makedirs(spec)
        os.makedirs(os.path.join(home, "run"))
        with open(os.path.join(spec, "kernel.json"), "w") as f:
            json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                       "display_name": f"Python ({sys.executable})", "language": "python"}, f)
        xdg = os.path.join(home, "xdg")  # tessera.start's sockets: $XDG_RUNTIME_DIR/tessera
        os.makedirs(xdg, mode=0o700)
        os.environ.update(XDG_RUNTIME_DIR=xdg, JUPYTER_PATH=os.path.join(home, "data"),
                          JUPYTER_DATA_DIR=os.path.join(home, "data"), JUPYTER_CONFIG_DIR=os.path.join(home, "config"), JUPYTER_RUNTIME_DIR=os.path.join(home, "run"),
                          IPYTHONDIR=os.path.join(home, "ipython"), JUPYTER_PLATFORM_DIRS="1",
                          PYDEVD_DISABLE_FILE_VALIDATION="1")
        # Unix sockets in the temporary directory, not TCP ports on localhost.
        km = KernelManager(kernel_name=name, transport="ipc", ip=os.path.join(home, "run", "kernel"))
        client = NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": home}})
        start = time.monotonic()
        try:
            client.execute()
        except CellExecutionError as e:
            print(f"{sys.argv[1]}: a cell failed:\n" + re.sub(r"\x1b\[[0-9;]*m", "", str(e)))
            return 1
        finally:
            if km.has_kernel:  # ours, so nbclient leaves it running
                km.shutdown_kernel()
            running = stop_sessions(os.path.join(xdg, "tessera"))
        seconds = time.monotonic() - start
    if running:
        print(f"{sys.argv[1]}: the notebook left {running} session(s) running (stopped now)")
        return 1
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [(i, o.text) for i, c in enumerate(code) for o in c.outputs
              if o.output_type == "stream" and o.name == "stderr"]
    for i, c in enumerate(code):
        for o in c.outputs:
            text = o.get("text") or o.get("data", {}).get("text/plain", "")
            if text:
                print(f"[{i}] {text.rstrip()}")
    if errors:
        print(f"{sys.argv[1]}: code cell(s) {', '.join(str(i) for i, _ in errors)} wrote to stderr:\n"
              + "\n".join(text for _, text in errors))
        return 1
    quiet = [i for i, c in enumerate(code) if "verbose=True" in c.source and not any(
             "<progress" in o.get("data", {}).get("text/html", "") for o in c.outputs)]
    if quiet:
        print(f"{sys.argv[1]}: verbose code cell(s) {quiet} showed no progress block")
        return 1
    if any(c.execution_count is None for c in code):
        print(f"{sys.argv[1]}: not every code cell ran")
        return 1
    print(f"{sys.argv[1]}: {len(code)} code cells ran in {seconds:.1f} s (kernel {sys.executable})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
