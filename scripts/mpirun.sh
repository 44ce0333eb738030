#!/usr/bin/env bash
# mpirun as Tessera's tests and demo use it: ranks may outnumber cores, root is
# allowed (CI and containers run as root), and idle ranks yield the core.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
# ob1 is the PML Open MPI picks here; naming it skips probing cm's network
# MTLs (PSM/PSM2 look for Omni-Path hardware), which doubles a short job's start.
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}"
# A job on this node alone gets its own session directory base. Open MPI
# keeps every job's directory under one top directory per user and host
# ($TMPDIR/ompi.HOST.UID) and removes it when a job ends and finds it empty;
# a job starting at that moment fails to create its own inside
# ("ORTE_ERROR_LOG: Error in file ../../../orte/util/session_dir.c"), a race
# that tests running side by side hit. The base is named by mpirun's PID
# (exec keeps this shell's), and each launch removes the bases of ended
# ones; the directory holding them is per user and PID namespace, where a
# PID means one process. Left alone: a base the user chose, and jobs across
# nodes (the base would be made on every node, and only this one's removed).
single_node=1
[ -n "${OMPI_MCA_orte_default_hostfile:-}${OMPI_MCA_orte_tmpdir_base:-}" ] && single_node=
[ -n "${OMPI_MCA_orte_local_tmpdir_base:-}${OMPI_MCA_orte_remote_tmpdir_base:-}" ] && single_node=
for arg in "$@"; do
  case "$arg" in --host|-host|-H|--hostfile|-hostfile|--machinefile|-machinefile|--default-hostfile) single_node= ;; esac
done
if [ -n "$single_node" ]; then
  bases="${TMPDIR:-/tmp}/tessera-mpirun.$(id -u).$(stat -Lc %i /proc/self/ns/pid 2>/dev/null || echo 0)"
  mkdir -p -m 700 "$bases"
  for base in "$bases"/*; do
    [ -d "$base" ] && ! kill -0 "${base##*/}" 2>/dev/null && rm -rf "$base"
  done
  # Global, not orte_local_tmpdir_base: mpirun sets the global one for its
  # ranks, and Open MPI 4.1 refuses both in one process.
  mkdir -p "$bases/$$" && export OMPI_MCA_orte_tmpdir_base="$bases/$$"
fi
exec mpirun --oversubscribe "$@"
