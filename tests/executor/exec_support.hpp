#pragma once
// Shared by the executor's tests: traffic matrices, user layouts (packed, or with gaps and a
// permuted block order), byte patterns that encode (src, dst, offset), and the check of a
// receive buffer against the layout it must have.

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <fast/exec/exec.hpp>
#include <fast/traffic.hpp>

namespace exec_test {

inline std::uint64_t splitmix(std::uint64_t& s) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/// Byte `o` of block (src, dst).
inline std::uint8_t pattern(int src, int dst, std::uint64_t o, std::uint64_t salt = 0) {
    return static_cast<std::uint8_t>(src * 131 + dst * 31 + static_cast<int>(o % 251) * 7 +
                                     static_cast<int>((o >> 8) % 253) * 13 + static_cast<int>((o >> 16) % 255) * 29 +
                                     static_cast<int>(salt % 256) + 1);
}

inline constexpr std::uint8_t gap_fill = 0xEE;      ///< bytes of a send buffer outside its blocks
inline constexpr std::uint8_t recv_sentinel = 0xA5; ///< bytes of a receive buffer before the call

/// Skewed random traffic: a share of zero entries, the rest heavy-tailed around `mean` bytes,
/// odd sizes included, the diagonal too.
inline fast::traffic_matrix random_skewed(int r, std::uint64_t seed, std::int64_t mean, int zero_percent = 20) {
    fast::traffic_matrix m(r, r);
    std::uint64_t s = seed * 7919 + 17;
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < r; ++j) {
            if (static_cast<int>(splitmix(s) % 100) < zero_percent) {
                m(i, j) = 0;
                continue;
            }
            const double u = (static_cast<double>(splitmix(s) % 1000000) + 1) / 1000001.0;
            const double heavy = std::min(20.0, 0.3 / (u * u + 0.03)); // 0.3 .. 20 times the mean
            m(i, j) = 1 + static_cast<std::int64_t>(heavy * static_cast<double>(mean)) +
                      static_cast<std::int64_t>(splitmix(s) % 7);
        }
    return m;
}

inline fast::traffic_matrix hot_pair(int r, int a, int b, std::int64_t bytes) {
    fast::traffic_matrix m = fast::traffic_matrix::Zero(r, r);
    m(a, b) = bytes;
    return m;
}

inline fast::traffic_matrix self_only(int r, std::int64_t bytes) {
    fast::traffic_matrix m = fast::traffic_matrix::Zero(r, r);
    for (int i = 0; i < r; ++i) m(i, i) = bytes + i;
    return m;
}

/// One side of a rank's user layout.
struct user_layout {
    std::vector<std::size_t> counts, displs;
    std::size_t extent = 0; ///< buffer size
};

/// Packed (exclusive prefix sums), or blocks in a permuted order with gaps between them.
inline user_layout make_layout(const std::vector<std::int64_t>& counts, bool gapped, std::uint64_t seed) {
    user_layout l;
    const std::size_t n = counts.size();
    l.counts.assign(counts.begin(), counts.end());
    l.displs.assign(n, 0);
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::uint64_t s = seed * 104729 + 3;
    if (gapped)
        for (std::size_t k = n; k > 1; --k) std::swap(order[k - 1], order[splitmix(s) % k]);
    std::size_t at = 0;
    for (const std::size_t j : order) {
        if (gapped) at += splitmix(s) % 61; // a gap (sometimes none)
        l.displs[j] = at;
        at += l.counts[j];
    }
    l.extent = at + (gapped ? 13 : 0);
    return l;
}

struct rank_buffers {
    user_layout send, recv;
    std::vector<std::uint8_t> send_data, recv_data;
};

inline std::vector<std::int64_t> row(const fast::traffic_matrix& m, int i) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(m.cols()));
    for (Eigen::Index j = 0; j < m.cols(); ++j) v[static_cast<std::size_t>(j)] = m(i, j);
    return v;
}

inline std::vector<std::int64_t> column(const fast::traffic_matrix& m, int j) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(m.rows()));
    for (Eigen::Index i = 0; i < m.rows(); ++i) v[static_cast<std::size_t>(i)] = m(i, j);
    return v;
}

/// Rank `me`'s buffers for matrix `m`: send blocks filled with the pattern, gaps with gap_fill,
/// the receive buffer with the sentinel.
inline rank_buffers make_buffers(const fast::traffic_matrix& m, int me, bool gapped, std::uint64_t seed,
                                 std::uint64_t salt = 0) {
    rank_buffers b;
    b.send = make_layout(row(m, me), gapped, seed * 2 + static_cast<std::uint64_t>(me) * 1000003);
    b.recv = make_layout(column(m, me), gapped, seed * 2 + 1 + static_cast<std::uint64_t>(me) * 1000003);
    b.send_data.assign(std::max<std::size_t>(b.send.extent, 1), gap_fill);
    for (std::size_t j = 0; j < b.send.counts.size(); ++j)
        for (std::size_t o = 0; o < b.send.counts[j]; ++o)
            b.send_data[b.send.displs[j] + o] = pattern(me, static_cast<int>(j), o, salt);
    b.recv_data.assign(std::max<std::size_t>(b.recv.extent, 1), recv_sentinel);
    return b;
}

/// "" if `recv` holds exactly what rank `me` must receive (blocks in place, gaps untouched).
inline std::string check_recv(const fast::traffic_matrix& m, int me, const user_layout& l,
                              std::span<const std::uint8_t> recv, std::uint64_t salt = 0) {
    for (std::size_t i = 0; i < l.counts.size(); ++i)
        if (static_cast<std::int64_t>(l.counts[i]) != m(static_cast<Eigen::Index>(i), me))
            return "rank " + std::to_string(me) + ": the layout does not match the matrix";
    std::vector<std::uint8_t> expected(recv.size(), recv_sentinel);
    for (std::size_t i = 0; i < l.counts.size(); ++i)
        for (std::size_t o = 0; o < l.counts[i]; ++o)
            expected[l.displs[i] + o] = pattern(static_cast<int>(i), me, o, salt);
    for (std::size_t k = 0; k < recv.size(); ++k)
        if (recv[k] != expected[k]) {
            std::string where = "a gap";
            for (std::size_t i = 0; i < l.counts.size(); ++i)
                if (k >= l.displs[i] && k < l.displs[i] + l.counts[i])
                    where = "block from rank " + std::to_string(i) + " offset " + std::to_string(k - l.displs[i]);
            return "rank " + std::to_string(me) + ": byte " + std::to_string(k) + " (" + where + ") is " +
                   std::to_string(recv[k]) + ", expected " + std::to_string(expected[k]);
        }
    return {};
}

/// An allgather among threads of one process (a bootstrap without MPI).
class thread_allgather {
public:
    explicit thread_allgather(int ranks) : ranks_(ranks), sync_(ranks), slots_(static_cast<std::size_t>(ranks)) {}
    fast::exec::bootstrap boot(int rank) {
        return {rank, ranks_, [this, rank](const void* s, void* r, std::size_t n) {
                    slots_[static_cast<std::size_t>(rank)].assign(static_cast<const char*>(s),
                                                                  static_cast<const char*>(s) + n);
                    sync_.arrive_and_wait();
                    bool same = true;
                    for (int k = 0; k < ranks_; ++k) {
                        const auto& v = slots_[static_cast<std::size_t>(k)];
                        if (v.size() != n) same = false;
                        else std::memcpy(static_cast<char*>(r) + static_cast<std::size_t>(k) * n, v.data(), n);
                    }
                    sync_.arrive_and_wait(); // also on a mismatch: nobody may write the next round early
                    return same ? fast::exec::status{}
                                : fast::exec::status(fast::exec::errc::bootstrap, "ranks gather different sizes");
                }};
    }

private:
    int ranks_;
    std::barrier<> sync_;
    std::vector<std::vector<char>> slots_;
};

} // namespace exec_test
