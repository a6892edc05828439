#pragma once
/// \file layout.hpp
/// The packed MPI_Alltoallv buffer layout of the plan contract: in rank i's send buffer the
/// block for rank j starts at sum_{k<j} traffic(i, k); in rank j's receive buffer the block from
/// rank i starts at sum_{k<i} traffic(k, j).

#include <cstdint>
#include <vector>

#include "traffic.hpp"

namespace fast {

struct alltoallv_layout {
    int ranks = 0;
    std::vector<std::int64_t> send_displs; ///< R * R, [i * R + j]: block (i, j) in i's send
    std::vector<std::int64_t> recv_displs; ///< R * R, [j * R + i]: block (i, j) in j's recv
    std::vector<std::int64_t> send_size;   ///< R: bytes in each rank's send buffer
    std::vector<std::int64_t> recv_size;   ///< R: bytes in each rank's receive buffer

    [[nodiscard]] std::int64_t send_displ(int src, int dst) const noexcept {
        return send_displs[static_cast<std::size_t>(src) * static_cast<std::size_t>(ranks) +
                           static_cast<std::size_t>(dst)];
    }
    [[nodiscard]] std::int64_t recv_displ(int src, int dst) const noexcept {
        return recv_displs[static_cast<std::size_t>(dst) * static_cast<std::size_t>(ranks) +
                           static_cast<std::size_t>(src)];
    }
};

/// Packed displacements of a validated traffic matrix. O(R^2).
[[nodiscard]] inline alltoallv_layout make_packed_layout(const traffic_matrix& m) {
    alltoallv_layout l;
    l.ranks = static_cast<int>(m.rows());
    const auto r = static_cast<std::size_t>(l.ranks);
    l.send_displs.resize(r * r);
    l.recv_displs.resize(r * r);
    l.send_size.assign(r, 0);
    l.recv_size.assign(r, 0);
    for (std::size_t i = 0; i < r; ++i) {
        for (std::size_t j = 0; j < r; ++j) {
            const std::int64_t b = m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
            l.send_displs[i * r + j] = l.send_size[i];
            l.send_size[i] += b;
            l.recv_displs[j * r + i] = l.recv_size[j];
            l.recv_size[j] += b;
        }
    }
    return l;
}

} // namespace fast
