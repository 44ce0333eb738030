// GoogleTest main for tests that run under mpirun: one Runtime for the whole
// run; only rank 0 prints progress, every rank prints its own failures, and
// the process exits 1 if any rank failed. A test that skipped itself
// (GTEST_SKIP: no data, a refused system call) makes the run exit 77, which
// ctest reports as skipped (SKIP_RETURN_CODE): it must not pass as if it
// had checked. Tests that do not apply to a rank count are left out with
// --gtest_filter where they are registered, not skipped.
#include <gtest/gtest.h>

#include "tessera/runtime/runtime.hpp"

namespace {
class QuietListener : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", tessera::Runtime::current().rank(),
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
};
}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  tessera::Runtime rt(argc, argv);
  if (rt.rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new QuietListener);
  }
  int outcome[2] = {RUN_ALL_TESTS() != 0 ? 1 : 0, testing::UnitTest::GetInstance()->skipped_test_count() > 0 ? 1 : 0};
  MPI_Allreduce(MPI_IN_PLACE, outcome, 2, MPI_INT, MPI_MAX, rt.comm());
  if (outcome[0] != 0) return 1;
  return outcome[1] != 0 ? 77 : 0;
}
