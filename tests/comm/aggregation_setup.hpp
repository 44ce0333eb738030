// A way to run an aggregator in a parameterized test: storage kind,
// same-node path, buffer size; the fixture turns it into options.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>

#include "tessera/comm/options.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::test {

struct Setup {
  const char* name;
  StorageKind storage;
  int direct;
  std::size_t buffer_bytes;  // 0: default
  int rings = 1;             // batches to co-locales through the same-node rings (1) or MPI (0)
};

class AggregationFixture : public testing::TestWithParam<Setup> {
 protected:
  StorageOptions storage() const {
    return GetParam().storage == StorageKind::heap ? StorageOptions::heap() : StorageOptions::shared();
  }
  AggregationOptions options() const {
    AggregationOptions o;
    o.buffer_bytes = GetParam().buffer_bytes;
    o.same_node_direct = GetParam().direct;
    o.same_node_rings = GetParam().rings;
    return o;
  }
  Runtime& rt() const { return Runtime::current(); }
};

}  // namespace tessera::test
