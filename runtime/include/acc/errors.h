#pragma once
// Exceptions thrown by acc. Every message names the problem and the fix.
#include <stdexcept>
#include <string>
#include <utility>

namespace acc {

/// Base of every acc exception.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Invalid option, environment variable or argument.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A collective or rendezvous failed: a peer died, stalled past the timeout, or ranks disagree.
class DistributedError : public Error {
 public:
  using Error::Error;
};

/// A checkpoint that cannot be written or does not fit the objects it is loaded into.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

/// acc::launch (function_launcher.h): a rank failed, the job's deadline passed, or SIGINT stopped
/// it. what() says which rank and how; the fields let a caller tell the cases apart without
/// parsing it. A type of its own because the fix is in the ranks' code, not in the call's
/// arguments (ConfigError) or in the network (DistributedError).
class LaunchError : public Error {
 public:
  LaunchError(const std::string& message, int rank, int exit_code, int signal, std::string rank_error)
      : Error(message), rank_(rank), exit_code_(exit_code), signal_(signal), rank_error_(std::move(rank_error)) {}

  /// The first rank that failed; -1 when none did (deadline, SIGINT).
  int rank() const { return rank_; }
  /// Its exit code: 1 when `fn` threw; -1 when it was killed by a signal or none failed.
  int exit_code() const { return exit_code_; }
  /// The signal that killed it, 0 if it exited.
  int signal() const { return signal_; }
  /// What the exception `fn` threw on that rank said; empty when it did not throw.
  const std::string& rank_error() const { return rank_error_; }

 private:
  int rank_;
  int exit_code_;
  int signal_;
  std::string rank_error_;
};

namespace safetensors {
/// A file that is not valid safetensors, or a tensor the format cannot hold. The message names
/// the file and the problem.
class FormatError : public Error {
 public:
  using Error::Error;
};
}  // namespace safetensors

}  // namespace acc
