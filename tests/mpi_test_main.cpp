// GoogleTest main for tests that run under mpirun: one Runtime for the whole
// run; only rank 0 prints progress, every rank prints its own failures, and
// the process exits non-zero if any rank failed.
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
  int failed = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, rt.comm());
  return any;
}
