// The disk tier: Shared storage in a directory on disk (TESSERA_SHM_DIR,
// --shm-dir) holds graphs larger than memory. Its arrays are file mappings
// whose pages the kernel writes back and reclaims; passes over them hold a
// window at a time, so the page cache is never asked to keep more dirty
// pages than memory holds.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tessera/storage/storage.hpp"

namespace tessera {

// Whether a graph's arrays created with `options` on `rt` live in files on
// disk (Shared storage in a directory that is not tmpfs, ramfs or
// hugetlbfs): the disk tier, where writes go to the page cache and are
// written back, and where a pass should hold a window of an array, not all of it.
bool on_disk(const Runtime& rt, const StorageOptions& options);

// Drops the whole pages of [begin, end) from this process's page tables:
// the disk tier's windows. Anonymous or private pages would be lost, so
// this is for MAP_SHARED file mappings only (the page cache keeps their
// data, dirty pages included, and writes it back).
void release_file_pages(const std::byte* begin, const std::byte* end) noexcept;
// The same for elements [first, last) of a typed array.
template <class T>
void release_file_pages(const T* array, std::uint64_t first, std::uint64_t last) noexcept {
  release_file_pages(reinterpret_cast<const std::byte*>(array + first), reinterpret_cast<const std::byte*>(array + last));
}

// Whether a statfs f_type is a file system in memory (tmpfs, ramfs,
// hugetlbfs): not the disk tier, and local to the machine.
bool is_memory_file_system(unsigned long f_type) noexcept;

}  // namespace tessera
