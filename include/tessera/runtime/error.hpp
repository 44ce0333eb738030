// The one exception hierarchy of Tessera. Every message says what went wrong
// and names the thing (file, index, option) a user can act on.
#pragma once
#include <mpi.h>
#include <stdexcept>
#include <string>

namespace tessera {

// What kind of error it is, so that an error can travel between ranks (agree)
// and be rethrown as the same type on a rank that did not see it.
enum class ErrorCategory { generic, mpi, system, format, mismatch, range, config, peer, cancelled };

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  virtual ErrorCategory category() const noexcept { return ErrorCategory::generic; }
};

// An MPI call returned an error code.
class MpiError : public Error {
 public:
  MpiError(int code, const std::string& call, const char* file, int line);
  int code() const noexcept { return code_; }
  ErrorCategory category() const noexcept override { return ErrorCategory::mpi; }

 private:
  int code_;
};

// An operating-system call failed; carries errno's text.
class SystemError : public Error {
 public:
  SystemError(const std::string& what, int err);
  int error_number() const noexcept { return errno_; }
  ErrorCategory category() const noexcept override { return ErrorCategory::system; }

 private:
  int errno_;
};

// A file or metadata document is malformed or inconsistent.
class FormatError : public Error {
 public:
  using Error::Error;
  ErrorCategory category() const noexcept override { return ErrorCategory::format; }
};

// Two things that must agree do not (element type, size, length, rank count).
class MismatchError : public Error {
 public:
  using Error::Error;
  ErrorCategory category() const noexcept override { return ErrorCategory::mismatch; }
};

// A global index or argument lies outside its valid range.
class RangeError : public Error {
 public:
  using Error::Error;
  ErrorCategory category() const noexcept override { return ErrorCategory::range; }
};

// An option, environment variable or command-line value is invalid.
class ConfigError : public Error {
 public:
  using Error::Error;
  ErrorCategory category() const noexcept override { return ErrorCategory::config; }
};

// A peer process is gone or stopped answering.
class PeerError : public Error {
 public:
  using Error::Error;
  ErrorCategory category() const noexcept override { return ErrorCategory::peer; }
};

// A collective workflow stopped at a cancellation point because its user
// asked (an analyst's session: a keyboard interrupt); see cancellation.hpp.
class Cancelled : public Error {
 public:
  using Error::Error;
  ErrorCategory category() const noexcept override { return ErrorCategory::cancelled; }
};

// Throws an error of `category` carrying `message` (MpiError and SystemError,
// which carry codes, become a plain Error with their text).
[[noreturn]] void throw_error(ErrorCategory category, const std::string& message);

void check_mpi(int code, const char* call, const char* file, int line);

// Reports an uncaught error and ends the whole job: the message is printed by
// one rank only (the lowest failing one wins the race in practice), then
// MPI_Abort stops every rank. Safe to call before MPI is initialised.
[[noreturn]] void abort_job(const std::exception& e, int exit_code = 1);

}  // namespace tessera

#define TESSERA_MPI(call) ::tessera::check_mpi((call), #call, __FILE__, __LINE__)
