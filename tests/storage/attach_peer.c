/* A separate, non-MPI process in plain C: attaches to a shared array through
 * the C ABI, checks that element i holds i*2654435761+17 (what the job wrote),
 * and writes back 3*value+1 for the job to see.
 * It also proves the attachment copies nothing: reading and writing every
 * element must grow this process's resident shared memory by about the array
 * size and its private (anonymous) memory by almost nothing.
 * Usage: attach_peer METADATA_PATH.  Exit 0 on success. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"

/* A field of /proc/self/smaps_rollup, in KiB. */
static long smaps_kib(const char* field) {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  long value = -1;
  size_t n = strlen(field);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, field, n) == 0 && line[n] == ':') sscanf(line + n + 1, "%ld", &value);
  if (f) fclose(f);
  return value;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: attach_peer METADATA_PATH\n");
    return 64;
  }
  tessera_array* a = NULL;
  if (tessera_attach(argv[1], TESSERA_READ_WRITE, &a) != 0) {
    fprintf(stderr, "attach_peer: %s\n", tessera_last_error());
    return 3;
  }
  if (strcmp(tessera_element_type(a), "uint64") != 0 || tessera_element_size(a) != 8) {
    fprintf(stderr, "attach_peer: unexpected element type %s\n", tessera_element_type(a));
    return 4;
  }
  long anon_before = smaps_kib("Anonymous"), shared_before = smaps_kib("Shared_Dirty") + smaps_kib("Shared_Clean");
  uint64_t seen = 0;
  for (int s = 0; s < tessera_segment_count(a); ++s) {
    uint64_t* x = (uint64_t*)tessera_segment_data(a, s);
    uint64_t first = tessera_segment_begin(a, s), n = tessera_segment_length(a, s);
    if (first != seen) {
      fprintf(stderr, "attach_peer: segment %d starts at %" PRIu64 ", expected %" PRIu64 "\n", s, first, seen);
      return 5;
    }
    for (uint64_t k = 0; k < n; ++k) {
      uint64_t i = first + k, want = i * 2654435761ull + 17;
      if (x[k] != want) {
        fprintf(stderr, "attach_peer: element %" PRIu64 " is %" PRIu64 ", expected %" PRIu64 "\n", i, x[k], want);
        return 2;
      }
      x[k] = 3 * x[k] + 1;
    }
    seen += n;
  }
  if (seen != tessera_length(a)) {
    fprintf(stderr, "attach_peer: segments hold %" PRIu64 " of %" PRIu64 " elements\n", seen, tessera_length(a));
    return 6;
  }
  if (tessera_segment_data(a, tessera_segment_count(a)) != NULL) return 7; /* out-of-range segment */
  long anon = smaps_kib("Anonymous") - anon_before;
  long shared = smaps_kib("Shared_Dirty") + smaps_kib("Shared_Clean") - shared_before;
  long array_kib = (long)(tessera_length(a) * 8 / 1024);
  printf("attach_peer: array %ld KiB; private memory grew %ld KiB, shared resident memory grew %ld KiB\n",
         array_kib, anon, shared);
  if (array_kib >= 16384 && (anon > array_kib / 100 + 256 || shared < array_kib * 9 / 10)) {
    fprintf(stderr, "attach_peer: the attachment is not zero-copy (private +%ld KiB for a %ld KiB array)\n", anon,
            array_kib);
    return 8;
  }
  tessera_detach(a);
  return 0;
}
