#pragma once
/// \file piece.hpp
/// A byte range with its provenance: what balancing assigns to a rail (detail/balancing.hpp,
/// fast::balance) and what emission cuts into transfers (detail/emission.hpp).

#include <cstdint>

namespace fast {

/// A contiguous run of block (origin -> final) of one tile, carried over one rail. `origin` and
/// `final` are local GPU indices in the source and destination servers; `offset` is the byte
/// offset inside the block.
struct piece {
    std::int64_t offset = 0;
    std::int64_t bytes = 0;
    std::int32_t origin = 0;
    std::int32_t final = 0;

    friend bool operator==(const piece&, const piece&) = default;
};

} // namespace fast
