#!/usr/bin/env bash
# Builds the root file system of the tessera-analyze image from what is
# installed here, with no registry and no network: the programs, every shared
# library they load (their ldd closure, the dynamic loader included), and the
# parts of Open MPI that a singleton MPI_Init loads at run time (orted, the
# MCA and PMIx plugins with their own closures, help texts, configuration).
#
# Usage: containers/analyze/make-rootfs.sh BUILD_DIR OUT_DIR [PROGRAM...]
#   PROGRAM defaults to BUILD_DIR/tessera-analyze; each lands in
#   OUT_DIR/usr/local/bin, its libtessera beside the system libraries.
# Then: podman build -t tessera-analyze -f containers/analyze/Containerfile OUT_DIR/..
# (see containers/analyze/README.md).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64; }
build=$(cd "$1" && pwd); out=$2; shift 2
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=("$build/tessera-analyze")
for p in "${programs[@]}"; do
  [ -x "$p" ] || { echo "make-rootfs: $p is not a built program (build tessera-analyze first: make build)" >&2; exit 1; }
done
rm -rf "$out"; mkdir -p "$out"/{usr/local/bin,usr/lib/x86_64-linux-gnu,usr/lib64,usr/bin,tmp,dev,proc,etc,data}
chmod 1777 "$out/tmp"
# Debian 12's merged /usr: /lib, /lib64 and /bin are links into /usr.
ln -s usr/lib "$out/lib"; ln -s usr/lib64 "$out/lib64"; ln -s usr/bin "$out/bin"

# Copies a file to the same path under $out, following symlinks but keeping
# the link names the loader looks for.
copy_path() {
  local f=$1
  [ -e "$out$f" ] && return 0
  mkdir -p "$out$(dirname "$f")"
  cp -L --preserve=mode "$f" "$out$f"
}
# A program or library and everything it loads.
copy_with_closure() {
  local f=$1
  copy_path "$f"
  ldd "$f" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\/.*ld-linux/ {print $1}' | while read -r lib; do
    case $lib in "$build"/*) ;; *) copy_path "$lib" ;; esac  # libtessera: see below
  done
}

for p in "${programs[@]}"; do
  cp -L --preserve=mode "$p" "$out/usr/local/bin/"
  copy_with_closure "$p"
  # libtessera from the build tree: the RPATH points there; put it where the
  # loader looks by default instead.
  ldd "$p" | awk -v b="$build" '$3 ~ "^"b {print $3}' | while read -r lib; do
    cp -L "$lib" "$out/usr/lib/x86_64-linux-gnu/"
  done
done

# Open MPI 4 (Debian 12): a singleton MPI_Init starts orted and loads plugins.
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
for d in /usr/lib/$multiarch/openmpi /usr/lib/$multiarch/pmix2 /usr/share/openmpi /usr/share/pmix /etc/openmpi; do
  [ -e "$d" ] || continue
  mkdir -p "$out$(dirname "$d")"
  cp -a "$d" "$out$(dirname "$d")/"
done
for orted in /usr/bin/orted /usr/bin/opal_wrapper; do [ -e "$orted" ] && copy_with_closure "$orted"; done
find "$out/usr/lib/$multiarch/openmpi" "$out/usr/lib/$multiarch/pmix2" -name '*.so' 2>/dev/null |
  while read -r plugin; do
    { ldd "$plugin" 2>/dev/null || true; } | awk '/=>/ && $3 ~ /^\// {print $3}' | while read -r lib; do copy_path "$lib"; done
  done
# Dangling symlinks (e.g. libmpi.so -> a real name elsewhere) made real.
find "$out" -xtype l | while read -r link; do
  target=${link#"$out"}
  if [ -e "$target" ]; then rm "$link"; cp -L "$target" "$link"; fi
done

# Enough of /etc for getpwuid and the loader.
printf 'root:x:0:0:root:/root:/bin/false\nanalyst:x:1000:1000::/tmp:/bin/false\nnobody:x:65534:65534::/:/bin/false\n' >"$out/etc/passwd"
printf 'root:x:0:\nanalyst:x:1000:\nnogroup:x:65534:\n' >"$out/etc/group"
echo "/usr/lib/$multiarch" >"$out/etc/ld.so.conf"
echo "make-rootfs: $(du -sh "$out" | cut -f1) in $out for ${programs[*]##*/}"
