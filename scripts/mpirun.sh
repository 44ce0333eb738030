#!/usr/bin/env bash
# mpirun as Tessera's tests and demo use it: ranks may outnumber cores, root is
# allowed (CI and containers run as root), and idle ranks yield the core.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
# ob1 is the PML Open MPI picks here; naming it skips probing cm's network
# MTLs (PSM/PSM2 look for Omni-Path hardware), which doubles a short job's start.
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}"
exec mpirun --oversubscribe "$@"
