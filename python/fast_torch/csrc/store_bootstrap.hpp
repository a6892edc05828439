#pragma once
/// \file store_bootstrap.hpp
/// The executor's bootstrap over the c10d Store that PyTorch hands a backend (a PrefixStore of
/// the group over the job's TCPStore or FileStore): no MPI.

#include <fast/exec/communicator.hpp>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace fast_torch {

/// A bootstrap for `rank` of `size` whose allgather round k sets the key "<prefix>/<k>/<rank>"
/// to this rank's bytes and reads every rank's key of round k, waiting at most `timeout`; a
/// timeout names the ranks whose keys are missing. O(size) store operations per round.
[[nodiscard]] fast::exec::bootstrap make_store_bootstrap(c10::intrusive_ptr<c10d::Store> store, std::string prefix,
                                                         int rank, int size, std::chrono::milliseconds timeout);

/// Error texts of a collective call shared over the store, so that every rank can say why a
/// call that one rank could not run failed: the key "<prefix>/<call>/<rank>".
void publish_error(c10d::Store& store, const std::string& prefix, std::uint64_t call, int rank,
                   const std::string& text);

/// The first error text published for `call` by any of `size` ranks, or "" (never waits).
[[nodiscard]] std::string find_error(c10d::Store& store, const std::string& prefix, std::uint64_t call, int size);

} // namespace fast_torch
