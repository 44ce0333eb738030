// GoogleTest main for tests that run under mpirun: one Runtime for the whole
// run; only rank 0 prints progress, every rank prints its own failures, and
// the process exits 1 if any rank failed. A test that skipped itself
// (GTEST_SKIP: no data, a refused system call) makes the run exit 77, which
// ctest reports as skipped (SKIP_RETURN_CODE): it must not pass as if it
// had checked. Tests that do not apply to a rank count are left out with
// --gtest_filter where they are registered, not skipped.
// One program holds a layer's test files (fewer programs to link); the
// option --tests-of=FILE runs only the tests defined in FILE (a suffix of
// the path GoogleTest records), so each file keeps a ctest of its own.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "tessera/runtime/runtime.hpp"

namespace {
// GoogleTest's filter syntax: "POSITIVE[-NEGATIVE]", ':'-separated patterns
// of '*' (any run) and '?' (one character); an empty positive part is "*".
bool glob(std::string_view pattern, std::string_view name) {
  if (pattern.empty()) return name.empty();
  if (pattern[0] == '*') return glob(pattern.substr(1), name) || (!name.empty() && glob(pattern, name.substr(1)));
  return !name.empty() && (pattern[0] == '?' || pattern[0] == name[0]) && glob(pattern.substr(1), name.substr(1));
}

bool any_pattern(std::string_view patterns, std::string_view name) {
  while (true) {
    auto colon = patterns.find(':');
    if (glob(patterns.substr(0, colon), name)) return true;
    if (colon == std::string_view::npos) return false;
    patterns.remove_prefix(colon + 1);
  }
}

bool passes_filter(std::string_view filter, std::string_view name) {
  auto dash = filter.find('-');
  auto positive = filter.substr(0, dash);
  if (!any_pattern(positive.empty() ? "*" : positive, name)) return false;
  return dash == std::string_view::npos || !any_pattern(filter.substr(dash + 1), name);
}

// Removes --tests-of=FILE from argv; returns FILE ("" without the option).
std::string take_tests_of(int& argc, char** argv) {
  constexpr std::string_view option = "--tests-of=";
  std::string file;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with(option))
      file = argv[i] + option.size();
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  argv[argc] = nullptr;
  return file;
}

// Narrows the filter to the tests defined in `file` that it already passes;
// false when none is left (a registration that would run nothing).
bool only_tests_of(const std::string& file) {
  std::string filter = GTEST_FLAG_GET(filter), names;
  auto& unit = *testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s)
    for (int t = 0; t < unit.GetTestSuite(s)->total_test_count(); ++t) {
      const testing::TestInfo& info = *unit.GetTestSuite(s)->GetTestInfo(t);
      std::string name = std::string(info.test_suite_name()) + "." + info.name();
      if (std::string_view(info.file()).ends_with(file) && passes_filter(filter, name))
        names += (names.empty() ? "" : ":") + name;
    }
  if (names.empty()) return false;
  GTEST_FLAG_SET(filter, names);
  return true;
}

class QuietListener : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", tessera::Runtime::current().rank(),
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
};
}  // namespace

int main(int argc, char** argv) {
  std::string tests_of = take_tests_of(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  if (!tests_of.empty() && !only_tests_of(tests_of)) {
    std::fprintf(stderr, "no test of %s passes --gtest_filter=%s\n", tests_of.c_str(), GTEST_FLAG_GET(filter).c_str());
    return 1;
  }
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
