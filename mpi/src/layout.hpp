#pragma once
/// \file layout.hpp
/// From MPI's (buffer, counts, displacements, datatype) to the executor's bytes: contiguous
/// datatypes map to byte counts and displacements directly; others go through a packing buffer.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fast::mpi {

/// What the executor needs of a datatype.
struct type_info {
    bool contiguous = false; ///< type size == extent == true extent, lb == true lb == 0
    std::size_t size = 0;    ///< bytes of data in one element
    MPI_Aint extent = 0;
};

type_info describe(MPI_Datatype t) noexcept;

/// The blocks of one side of an all-to-all, in elements: MPI_Alltoallv's counts and
/// displacements, or MPI_Alltoall's one count (block j at j * count).
struct block_list {
    const int* counts = nullptr;
    const int* displs = nullptr;
    int uniform = 0;
    int ranks = 0;

    [[nodiscard]] int count(int j) const { return counts != nullptr ? counts[j] : uniform; }
    [[nodiscard]] long long displ(int j) const {
        return displs != nullptr ? displs[j] : static_cast<long long>(j) * uniform;
    }
};

/// One side of an all-to-all as the executor takes it: a base address and byte counts and
/// displacements from it. A packed side owns its staging buffer (blocks back to back).
struct byte_side {
    std::uintptr_t base = 0;
    std::vector<std::size_t> counts, displs;
    std::size_t total = 0;
    std::vector<unsigned char> staging;

    [[nodiscard]] bool packed() const { return !staging.empty(); }
    [[nodiscard]] void* data() const { return reinterpret_cast<void*>(base); }
};

/// Describes `blocks` of `buf` in bytes. Contiguous types map in place (displacements may be
/// negative: the base moves to the lowest block); other types get a staging buffer when `pack`
/// is true. False when a count is negative, a block is too large, or the type is not contiguous
/// and `pack` is false.
bool make_side(const void* buf, const block_list& blocks, MPI_Datatype type, bool pack, byte_side& out);

/// Copies the blocks of `buf` into the staging buffer of a packed side (MPI_Pack per block).
int pack(const void* buf, const block_list& blocks, MPI_Datatype type, MPI_Comm comm, byte_side& side) noexcept;

/// Copies the staging buffer of a packed side into `buf`'s blocks (MPI_Unpack per block).
int unpack(const byte_side& side, void* buf, const block_list& blocks, MPI_Datatype type, MPI_Comm comm) noexcept;

} // namespace fast::mpi
