// The C ABI of include/tessera.h over AttachedArray. Exceptions never cross it.
#include "tessera.h"

#include <memory>
#include <string>

#include "tessera/storage/attach.hpp"

struct tessera_array {
  tessera::AttachedArray attached;
};

namespace {
thread_local std::string g_last_error;

const tessera::AttachedArray::Segment* segment_of(const tessera_array* a, int s) {
  if (!a) {
    g_last_error = "null tessera_array";
    return nullptr;
  }
  if (s < 0 || static_cast<std::size_t>(s) >= a->attached.segment_count()) {
    g_last_error = "segment " + std::to_string(s) + " is out of range [0, " +
                   std::to_string(a->attached.segment_count()) + ")";
    return nullptr;
  }
  return &a->attached.segment(static_cast<std::size_t>(s));
}
}  // namespace

extern "C" {

int tessera_attach(const char* metadata_path, int access, tessera_array** out) {
  if (!out || !metadata_path) {
    g_last_error = "tessera_attach: null argument";
    return -1;
  }
  *out = nullptr;
  try {
    auto mode = access == TESSERA_READ_WRITE ? tessera::Access::read_write : tessera::Access::read_only;
    auto array = std::make_unique<tessera_array>(tessera_array{tessera::AttachedArray::open(metadata_path, mode)});
    *out = array.release();
    return 0;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1;
  }
}

void tessera_detach(tessera_array* array) { std::unique_ptr<tessera_array> owned(array); }

const char* tessera_last_error(void) { return g_last_error.c_str(); }

const char* tessera_element_type(const tessera_array* a) { return a ? a->attached.element().name.c_str() : ""; }
size_t tessera_element_size(const tessera_array* a) { return a ? a->attached.element().size : 0; }
uint64_t tessera_length(const tessera_array* a) { return a ? a->attached.length() : 0; }
int tessera_segment_count(const tessera_array* a) { return a ? static_cast<int>(a->attached.segment_count()) : 0; }

void* tessera_segment_data(const tessera_array* a, int s) {
  auto seg = segment_of(a, s);
  return seg ? seg->data : nullptr;
}
uint64_t tessera_segment_begin(const tessera_array* a, int s) {
  auto seg = segment_of(a, s);
  return seg ? seg->begin : 0;
}
uint64_t tessera_segment_length(const tessera_array* a, int s) {
  auto seg = segment_of(a, s);
  return seg ? seg->count : 0;
}
}
