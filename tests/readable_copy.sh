#!/usr/bin/env bash
# readable_copy.sh DEST PROGRAM...: copies each PROGRAM and the shared
# libraries it loads from outside the system directories (libtessera from the
# build tree) into DEST, mode 0755. A test that runs a program as another user
# (setpriv) runs these copies with LD_LIBRARY_PATH=DEST: that user may not be
# able to enter the checkout (a clone under /root, or in a 0700 directory).
set -euo pipefail
dest=$1; shift
mkdir -p "$dest"
chmod 0755 "$dest"
for prog in "$@"; do
  install -m 0755 "$prog" "$dest/"
  ldd "$prog" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
    case "$lib" in
      /lib/* | /lib64/* | /usr/*) ;;
      *) install -m 0644 "$lib" "$dest/" ;;
    esac
  done
done
