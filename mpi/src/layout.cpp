#include "layout.hpp"

#include <algorithm>
#include <climits>
#include <limits>

namespace fast::mpi {

namespace {

std::uintptr_t address(const void* buf, long long displ, MPI_Aint extent) {
    // Integer arithmetic: MPI_BOTTOM is a null pointer plus absolute displacements.
    return reinterpret_cast<std::uintptr_t>(buf) + static_cast<std::uintptr_t>(displ * static_cast<long long>(extent));
}

// No negative count; packed blocks within MPI_Pack's int sizes.
bool counts_fit(const block_list& blocks, std::size_t size, bool packed) {
    for (int j = 0; j < blocks.ranks; ++j) {
        const int c = blocks.count(j);
        if (c < 0) return false;
        if (packed && size != 0 && static_cast<std::size_t>(c) > static_cast<std::size_t>(INT_MAX) / size) return false;
    }
    return true;
}

} // namespace

type_info describe(MPI_Datatype t) noexcept {
    type_info out;
    if (t == MPI_DATATYPE_NULL) return out;
    MPI_Count size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    if (PMPI_Type_size_x(t, &size) != MPI_SUCCESS || PMPI_Type_get_extent_x(t, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_x(t, &true_lb, &true_extent) != MPI_SUCCESS)
        return out;
    out.size = static_cast<std::size_t>(size);
    out.extent = static_cast<MPI_Aint>(extent);
    out.contiguous = size == extent && extent == true_extent && lb == 0 && true_lb == 0;
    return out;
}

bool make_side(const void* buf, const block_list& blocks, MPI_Datatype type, bool pack, byte_side& out) {
    out = byte_side{};
    const type_info t = describe(type);
    if (!t.contiguous && (!pack || type == MPI_DATATYPE_NULL)) return false;
    if (!counts_fit(blocks, t.size, !t.contiguous)) return false;
    const auto n = static_cast<std::size_t>(blocks.ranks);
    out.counts.resize(n);
    out.displs.resize(n);
    for (int j = 0; j < blocks.ranks; ++j) {
        out.counts[static_cast<std::size_t>(j)] = static_cast<std::size_t>(blocks.count(j)) * t.size;
        out.total += out.counts[static_cast<std::size_t>(j)];
    }
    if (!t.contiguous) { // blocks back to back in the staging buffer
        for (std::size_t j = 0, at = 0; j < n; at += out.counts[j++]) out.displs[j] = at;
        out.staging.resize(std::max<std::size_t>(out.total, 1));
        out.base = reinterpret_cast<std::uintptr_t>(out.staging.data());
        return true;
    }
    // In place: the base is the lowest block with data, so that every displacement is >= 0.
    std::uintptr_t low = std::numeric_limits<std::uintptr_t>::max();
    for (int j = 0; j < blocks.ranks; ++j)
        if (out.counts[static_cast<std::size_t>(j)] > 0) low = std::min(low, address(buf, blocks.displ(j), t.extent));
    out.base = out.total > 0 ? low : reinterpret_cast<std::uintptr_t>(buf);
    for (int j = 0; j < blocks.ranks; ++j)
        if (out.counts[static_cast<std::size_t>(j)] > 0)
            out.displs[static_cast<std::size_t>(j)] = address(buf, blocks.displ(j), t.extent) - out.base;
    return true;
}

int pack(const void* buf, const block_list& blocks, MPI_Datatype type, MPI_Comm comm, byte_side& side) noexcept {
    const type_info t = describe(type);
    for (int j = 0; j < blocks.ranks; ++j) {
        const auto bytes = static_cast<int>(side.counts[static_cast<std::size_t>(j)]);
        if (bytes == 0) continue;
        int position = 0;
        const int rc =
            PMPI_Pack(reinterpret_cast<const void*>(address(buf, blocks.displ(j), t.extent)), blocks.count(j), type,
                      side.staging.data() + side.displs[static_cast<std::size_t>(j)], bytes, &position, comm);
        if (rc != MPI_SUCCESS) return rc;
        if (position != bytes) return MPI_ERR_TYPE; // a packed form that is not the type's data alone
    }
    return MPI_SUCCESS;
}

int unpack(const byte_side& side, void* buf, const block_list& blocks, MPI_Datatype type, MPI_Comm comm) noexcept {
    const type_info t = describe(type);
    for (int j = 0; j < blocks.ranks; ++j) {
        const auto bytes = static_cast<int>(side.counts[static_cast<std::size_t>(j)]);
        if (bytes == 0) continue;
        int position = 0;
        const int rc =
            PMPI_Unpack(side.staging.data() + side.displs[static_cast<std::size_t>(j)], bytes, &position,
                        reinterpret_cast<void*>(address(buf, blocks.displ(j), t.extent)), blocks.count(j), type, comm);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

} // namespace fast::mpi
