/* Attach to a persistent array that Tessera wrote, read it in place, detach.
 * Any .tsg output is one: `tessera convert grid.el -o g.tsg` leaves
 * g.tsg/offsets.json and g.tsg/dst.json (metadata) beside one segment per
 * rank: each rank's CSR row offsets and its arcs' destinations.
 * Build: cc attach.c -ltessera    Run: ./attach g.tsg/offsets.json */
#include <inttypes.h>
#include <stdio.h>
#include <tessera.h>

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "g.tsg/offsets.json";
  tessera_array* a;
  if (tessera_attach(path, TESSERA_READ_ONLY, &a) != 0) {
    fprintf(stderr, "%s\n", tessera_last_error());
    return 1;
  }
  for (int s = 0; s < tessera_segment_count(a); ++s) {
    const uint64_t* x = tessera_segment_data(a, s);   /* elements [begin, begin + length) */
    uint64_t n = tessera_segment_length(a, s);
    printf("segment %d: elements %" PRIu64 "..%" PRIu64 ", %" PRIu64 " arcs\n", s, tessera_segment_begin(a, s),
           tessera_segment_begin(a, s) + n, n ? x[n - 1] : 0);   /* a rank's last row offset: its arc count */
  }
  tessera_detach(a);
  return 0;
}
