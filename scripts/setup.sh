#!/usr/bin/env bash
# Installs the Debian packages Tessera builds and tests with. Idempotent: prints
# nothing and exits 0 when everything is already there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin
  libhwloc-dev hwloc
  libcli11-dev nlohmann-json3-dev
  libgtest-dev googletest
  python3-scipy
  bubblewrap  # the containerized analysis (scripts/analyze-in-container.sh) and its tests
  python3-matplotlib  # scripts/plot_bench.py (issue 13)
  autoconf automake  # scripts/bench_vs_bale.py builds Bale from the tree it is given
  # Slurm on the emulated cluster (scripts/slurm_cluster.py, tests/cluster/test_slurm.py):
  # the daemons and srun/sbatch; the plugins (auth/none, mpi/pmix) come with them.
  slurmctld slurmd slurm-client

  # The Python package (python/, issue 11): headers, NumPy, pip (fetches
  # pybind11 >= 2.12 into the build tree), pytest and mpi4py for its tests.
  python3-dev python3-numpy python3-pip python3-pytest python3-mpi4py

  # For the tests only: a session's live page read in a real browser
  # (tests/python/test_dashboard.py): headless Chromium, its WebDriver, Selenium.
  chromium chromium-driver python3-selenium
  # Graphs in and out of NetworkX and pandas (s.from_networkx, s.from_pandas,
  # results' to_pandas): optional for users, checked by the tests.
  python3-networkx python3-pandas
)
# The trilinos/ layer (Tpetra, Belos, Ifpack2, Anasazi; ~170 MB). The last three must
# be named: the -dev packages above do not pull them in. Skip with
# TESSERA_WITH_TRILINOS=OFF in the environment (then configure with
# -DTESSERA_WITH_TRILINOS=OFF too).
if [ "${TESSERA_WITH_TRILINOS:-ON}" != "OFF" ]; then
  packages+=(libtrilinos-tpetra-dev libtrilinos-belos-dev libtrilinos-ifpack2-dev libtrilinos-anasazi-dev
             libtrilinos-teuchos-dev libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "tessera setup: missing packages: ${missing[*]}" >&2
    echo "Run as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi

echo "tessera setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
