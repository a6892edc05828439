#pragma once
/// \file registry.hpp
/// One channel per MPI communicator, created on the first FAST call on it and cached on the
/// communicator as an attribute: freed when the communicator is freed (the attribute's delete
/// callback) or, for those still alive, at MPI_Finalize before MPI itself finalizes.

#include <mpi.h>

#include "channel.hpp"
#include "counters.hpp"

#include <memory>
#include <string>

namespace fast::mpi {

/// What a communicator has: a channel, or (null) the reason it always falls back.
struct comm_entry {
    std::shared_ptr<channel> ch;
    fast::mpi::reason why = reason::unavailable;
};

/// The entry of `comm`. On the first call for `comm` this opens its channel, which is
/// collective: it happens in the first call that every rank decides (alike) to make FAST.
/// A communicator whose channel cannot be opened falls back from then on (a line on stderr on
/// rank 0 of it says why).
std::shared_ptr<comm_entry> entry_for(MPI_Comm comm);

/// Closes every channel (MPI_Finalize): a barrier on each, bounded by the timeout, so that no
/// rank closes its endpoints while a peer still uses them; then the threads end.
void close_all() noexcept;

} // namespace fast::mpi
