#pragma once
// Exceptions thrown by acc. Every message names the problem and the fix.
#include <stdexcept>
#include <string>

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

namespace safetensors {
/// A file that is not valid safetensors, or a tensor the format cannot hold. The message names
/// the file and the problem.
class FormatError : public Error {
 public:
  using Error::Error;
};
}  // namespace safetensors

}  // namespace acc
