/* Tessera C ABI: attach to a shared distributed array from any process or
 * language, with no copy. Link with -ltessera.
 *
 *   tessera_array* a = NULL;
 *   if (tessera_attach("/dev/shm/graph.json", TESSERA_READ_WRITE, &a) != 0)
 *     fprintf(stderr, "%s\n", tessera_last_error());
 *   for (int s = 0; s < tessera_segment_count(a); ++s) {
 *     double* x = tessera_segment_data(a, s);        // elements
 *     uint64_t first = tessera_segment_begin(a, s);   // global index of x[0]
 *     uint64_t n = tessera_segment_length(a, s);
 *   }
 *   tessera_detach(a);
 *
 * Functions returning int give 0 on success and -1 on error; the reason is in
 * tessera_last_error() (per thread). */
#ifndef TESSERA_H
#define TESSERA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessera_array tessera_array;

enum tessera_access { TESSERA_READ_ONLY = 0, TESSERA_READ_WRITE = 1 };

int tessera_attach(const char* metadata_path, int access, tessera_array** out);
void tessera_detach(tessera_array* array);
const char* tessera_last_error(void);

const char* tessera_element_type(const tessera_array* array); /* "float64", "int64", "bytes24", ... */
size_t tessera_element_size(const tessera_array* array);
uint64_t tessera_length(const tessera_array* array);
int tessera_segment_count(const tessera_array* array);
void* tessera_segment_data(const tessera_array* array, int segment);
uint64_t tessera_segment_begin(const tessera_array* array, int segment);
uint64_t tessera_segment_length(const tessera_array* array, int segment);

#ifdef __cplusplus
}
#endif
#endif
