// Helpers shared by the tests: a seeded generator and temporary directories.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/splitmix64.hpp"

namespace tessera::test {

// SplitMix64: tiny, seedable, the same on every rank and platform.
struct SplitMix64 {
  std::uint64_t state;
  explicit SplitMix64(std::uint64_t seed) : state(seed) {}
  std::uint64_t next() { return splitmix64(state); }
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }
};

// Element-wise |got - want| <= rel * max(1, |want|); a NaN wanted (an
// unreachable vertex) must be NaN.
inline void expect_values_near(const std::vector<double>& got, const std::vector<double>& want, double rel,
                               const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "]";
      continue;
    }
    EXPECT_NEAR(got[i], want[i], rel * std::max(1.0, std::fabs(want[i]))) << what << " [" << i << "]";
  }
}

// The value every test stores at global index i, so any rank can check it.
inline std::uint64_t value_of(std::uint64_t i) { return i * 2654435761ull + 17; }

// A directory made by rank 0 and shared by every rank; removed at scope end.
class ScratchDir {
 public:
  ScratchDir(Runtime& rt, const std::string& base = "/tmp") : rt_(rt) {
    char path[256] = {};
    if (rt.rank() == 0) {
      std::string tmpl = base + "/tessera-test-XXXXXX";
      std::snprintf(path, sizeof(path), "%s", tmpl.c_str());
      if (!mkdtemp(path)) path[0] = '\0';
    }
    MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, rt.comm());
    path_ = path;
  }
  ~ScratchDir() {
    MPI_Barrier(rt_.comm());
    if (rt_.rank() == 0 && !path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  Runtime& rt_;
  std::string path_;
};

// A name no other test run uses, the same on every rank.
inline std::string unique_name(Runtime& rt, const std::string& stem) {
  return "tessera-test-" + stem + "-" + rt.job_id();
}

// Runs f and expects an Exception whose message contains `fragment`.
template <class Exception, class F>
void expect_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const Exception& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace tessera::test
