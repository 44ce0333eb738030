// TESSERA_VECTOR_CLONES before a function whose loops vectorize: GCC
// compiles it twice, for the x86-64 baseline and for x86-64-v4 (AVX-512,
// eight 64-bit multiplies an instruction), and the loader picks the clone
// the CPU runs (target_clones, an ifunc). The binary stays portable; the
// hashing and generating loops run 2-5x faster where AVX-512 is.
// Helpers it calls inline into each clone when marked TESSERA_INLINE.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define TESSERA_VECTOR_CLONES
#endif
#define TESSERA_INLINE [[gnu::always_inline]] inline
