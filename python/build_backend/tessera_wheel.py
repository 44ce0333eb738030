"""The PEP 517 backend of `pip install ./python` (python/pyproject.toml).

Two paths to the same wheel, the files of the CMake install component
"python" (python/CMakeLists.txt says what it holds):

- Fast, when a configured build tree holds the package's targets (the one
  named by TESSERA_BUILD_DIR, else build/ of this checkout; it has
  python/package.json, written by python/CMakeLists.txt) and the extension it
  builds is for the installing interpreter:
      cmake --build TREE --target <the package's targets>   (nothing to do when up to date)
      cmake --install TREE --component python --prefix STAGE   (CMake sets the installed rpaths)
  then STAGE is zipped into the wheel with its METADATA, WHEEL and RECORD.
  Seconds after `make build`, and never stale: the build step brings the tree
  up to date first. Nothing is downloaded (no build requirements).
- Otherwise scikit-build-core (scikit_build_core.build): the library compiled
  from scratch in a temporary tree, as before; its requirements are asked for
  only then. TESSERA_BUILD_DIR=none forces it.

TESSERA_BUILD_DIR: absolute, or relative to the checkout's root (as the
Makefile's BUILD). TESSERA_BUILD_LOCK: a file held locked (flock) while the
tree is built and installed from, for machines where builds of one tree must
not overlap.

`python3 python/build_backend/tessera_wheel.py DIR` (what `make wheel` runs)
writes the wheel into DIR by the fast path, or fails saying why not.
"""
import base64
import contextlib
import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parent.parent  # python/
CHECKOUT = PYTHON_DIR.parent
# What the cold path needs installed in pip's build environment (the fast
# path needs nothing, so it works offline).
COLD_REQUIRES = ["scikit-build-core>=0.8", "pybind11>=2.12"]


def _say(message):
    print(f"tessera_wheel: {message}", file=sys.stderr, flush=True)


def _tree():
    """(tree, package.json's content) when the fast path applies, else None (saying why)."""
    given = os.environ.get("TESSERA_BUILD_DIR", "")
    if given.lower() == "none":
        _say("TESSERA_BUILD_DIR=none: building with scikit-build-core")
        return None
    tree = (CHECKOUT / (given or "build")).resolve()
    marker = tree / "python" / "package.json"
    if not (tree / "CMakeCache.txt").is_file() or not marker.is_file():
        _say(f"no configured build tree with the Python package at {tree} "
             "(make build, or TESSERA_BUILD_DIR): building with scikit-build-core")
        return None
    source = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", (tree / "CMakeCache.txt").read_text(), re.M)
    if not source or Path(source.group(1)).resolve() != CHECKOUT:
        _say(f"{tree} is the build tree of {source and source.group(1)}, not of {CHECKOUT}: "
             "building with scikit-build-core")
        return None
    info = json.loads(marker.read_text())
    wanted = "_tessera" + sysconfig.get_config_var("EXT_SUFFIX")
    if sys.implementation.name != "cpython" or info["module"] != wanted:
        _say(f"{tree} builds {info['module']} for {info['python']}, not {wanted} for {sys.executable}: "
             "building with scikit-build-core")
        return None
    return tree, info


def _tag():
    """The wheel's tag for this interpreter, as packaging.tags gives it first (cp311-cp311-linux_x86_64)."""
    version = f"{sys.version_info.major}{sys.version_info.minor}"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"cp{version}-cp{version}{sys.abiflags}-{platform}"


def _project():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib
    with open(PYTHON_DIR / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    written = {"name", "version", "description", "requires-python", "dependencies", "scripts"}
    for key in sorted(set(project) - written):
        _say(f"pyproject.toml [project] {key} is not written into the fast path's METADATA")
    return project


def _metadata(project):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _environment():
    env = dict(os.environ)
    # pip's isolated build environment puts a sitecustomize on PYTHONPATH that
    # hides site-packages from every Python, the tree's /usr/bin/python3 too: a
    # re-configure would find no NumPy and drop the package.
    for name in ("PYTHONPATH", "PYTHONNOUSERSITE"):
        env.pop(name, None)
    # As the Makefile: ccache (when the tree uses it) hashes paths relative to the checkout.
    env.setdefault("CCACHE_BASEDIR", str(CHECKOUT))
    env.setdefault("CCACHE_NOHASHDIR", "1")
    return env


@contextlib.contextmanager
def _build_lock():
    path = os.environ.get("TESSERA_BUILD_LOCK")
    if not path:
        yield
        return
    import fcntl
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _run(cmd, env, quiet=False):
    cmd = [str(c) for c in cmd]
    result = subprocess.run(cmd, env=env, stdout=subprocess.PIPE if quiet else None,
                            stderr=subprocess.STDOUT if quiet else None, text=True)
    if result.returncode != 0:
        if quiet:
            sys.stderr.write(result.stdout)
        raise RuntimeError(f"tessera_wheel: {' '.join(cmd)} failed (exit {result.returncode})")


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(stage, wheel_directory, project):
    name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    dist = f"{name}-{project['version']}"
    tag = _tag()
    info = f"{dist}.dist-info"
    files = []  # (path in the wheel, bytes, mode)
    for path in sorted(stage.rglob("*")):
        if path.is_file():  # symlinks followed (python/CMakeLists.txt installs none)
            files.append((path.relative_to(stage).as_posix(), path.read_bytes(), path.stat().st_mode))
    files.append((f"{info}/METADATA", _metadata(project).encode(), 0o644))
    files.append((f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: tessera_wheel (python/build_backend)\n"
                                    f"Root-Is-Purelib: false\nTag: {tag}\n").encode(), 0o644))
    if project.get("scripts"):
        entry = "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in project["scripts"].items())
        files.append((f"{info}/entry_points.txt", entry.encode(), 0o644))
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for arcname, data, _ in files:
        writer.writerow([arcname, _record_hash(data), len(data)])
    writer.writerow([f"{info}/RECORD", "", ""])
    files.append((f"{info}/RECORD", record.getvalue().encode(), 0o644))

    wheel_name = f"{dist}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    target = Path(wheel_directory) / wheel_name
    partial = target.with_name(target.name + ".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for arcname, data, mode in files:
            entry = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = ((0o755 if mode & 0o111 else 0o644) | 0o100000) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    os.replace(partial, target)
    return wheel_name


def _fast_wheel(tree, info, wheel_directory):
    env = _environment()
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    project = _project()
    with _build_lock(), tempfile.TemporaryDirectory(prefix="tessera-wheel-") as tmp:
        _say(f"reusing the build tree {tree}: building {' '.join(info['targets'])} (nothing when up to date)")
        _run(["cmake", "--build", tree, "--parallel", jobs, "--target", *info["targets"]], env)
        marker = tree / "python" / "package.json"  # again: the build may have re-configured the tree
        if not marker.is_file():
            raise RuntimeError(f"tessera_wheel: {tree} no longer builds the Python package (re-configured)")
        info = json.loads(marker.read_text())
        stage = Path(tmp) / "stage"
        _run(["cmake", "--install", tree, "--component", "python", "--prefix", stage], env, quiet=True)
        package = stage / "tessera"
        expected = ["__init__.py", "session/__init__.py", info["module"], "bin/tessera", "bin/tessera-analyze"]
        missing = [f for f in expected if not (package / f).is_file()]
        if missing or not list(package.glob("libtessera.so.*")):
            raise RuntimeError(f"tessera_wheel: the install component 'python' of {tree} lacks "
                               f"{', '.join(missing) or 'libtessera.so.*'}")
        wheel = _write_wheel(stage, wheel_directory, project)
    _say(f"wrote {wheel}")
    return wheel


# PEP 517 hooks. prepare_metadata_for_build_wheel is left out on purpose:
# pip then takes the metadata from the wheel built once by build_wheel.

def get_requires_for_build_wheel(config_settings=None):
    return [] if _tree() else list(COLD_REQUIRES)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    found = _tree()
    if found:
        return _fast_wheel(*found, wheel_directory)
    from scikit_build_core import build as skbuild
    return skbuild.build_wheel(wheel_directory, config_settings, metadata_directory)


# sdists and editable installs (pip install -e ./python): scikit-build-core's.

def get_requires_for_build_sdist(config_settings=None):
    return list(COLD_REQUIRES)


def build_sdist(sdist_directory, config_settings=None):
    from scikit_build_core import build as skbuild
    return skbuild.build_sdist(sdist_directory, config_settings)


def get_requires_for_build_editable(config_settings=None):
    return list(COLD_REQUIRES)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    from scikit_build_core import build as skbuild
    return skbuild.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    from scikit_build_core import build as skbuild
    return skbuild.build_editable(wheel_directory, config_settings, metadata_directory)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 python/build_backend/tessera_wheel.py WHEEL_DIR   "
                 "(TESSERA_BUILD_DIR: the build tree, default build/)")
    found = _tree()
    if not found:
        sys.exit("tessera_wheel: no build tree to reuse (above); pip install ./python builds one itself")
    try:
        name = _fast_wheel(*found, sys.argv[1])
    except RuntimeError as e:
        sys.exit(str(e))
    print(os.path.join(sys.argv[1], name))
