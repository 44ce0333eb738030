#!/usr/bin/env bash
# The worked example of docs/cli.md, on the example graph shipped in examples/.
# Run from the top of a checkout after `make build`.
set -euo pipefail
tessera=./build/tessera
$tessera cc examples/grid.el                           # 2 components: the grid and the triangle
$tessera pipeline examples/grid.el --targets 0 -n 2 -o times.txt  # largest component -> hitting times to 0
head -3 times.txt
$tessera convert examples/grid.el -o g.tsg             # a .tsg directory: persistent arrays, one segment per rank
ls g.tsg                                               # dst.json dst.r0.seg edgelist.json offsets.json offsets.r0.seg
$tessera gen kron -o kron.el --scale 10                # or generate one: kron, urand, grid
$tessera cc kron.el -n 2 --algorithm all          # Afforest (the default), label propagation, FastSV
