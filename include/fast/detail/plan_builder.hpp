#pragma once
// Turns a stage schedule into transfers. The schedule says, for every rail and scale-out step,
// how many bytes each server sends to which server; balancing (assign_tile) says which bytes of
// a tile each rail carries, in stream order. The builder walks every (server pair, rail) stream
// across that stream's slots and emits, per slice of a piece:
//   - a gather (scale-up, origin GPU -> carrier's scratch) unless the carrier is the origin,
//   - the scale-out transfer (carrier -> the same rail in the destination server),
//   - a redistribution (scale-up, receiver's scratch -> final GPU's recv) unless the receiver
//     is the final GPU; bytes that land on their final GPU go straight into recv.
// Consecutive slices that are contiguous at both ends merge into one transfer.
//
// Scratch: a region written in step w and read in step w + 1 lives in one of two arenas by the
// parity of w (landing and gather regions kept apart), so a rank's scratch is reused every other
// step; bytes gathered up front (the paper's balancing step) get a region of their own. Offsets
// are relative to a region until every region's size is known; the region is kept in the top
// bits of the offset and resolved when the steps are concatenated.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "../balance.hpp"
#include "../error.hpp"
#include "../plan.hpp"
#include "../traffic.hpp"

namespace fast::detail {

enum class region : std::uint8_t { landing_even, gather_even, landing_odd, gather_odd, staged };
inline constexpr int region_count = 5;
inline constexpr int region_shift = 58;
inline constexpr std::int64_t region_mask = (std::int64_t{1} << region_shift) - 1;

[[nodiscard]] constexpr std::int64_t encode_offset(region r, std::int64_t rel) noexcept {
    return (static_cast<std::int64_t>(r) << region_shift) | rel;
}
[[nodiscard]] constexpr region landing_region(std::int32_t step) noexcept {
    return step % 2 == 0 ? region::landing_even : region::landing_odd;
}
[[nodiscard]] constexpr region gather_region(std::int32_t step) noexcept {
    return step % 2 == 0 ? region::gather_even : region::gather_odd;
}

/// One slot's share of a (pair, rail) stream: `bytes` leave in scale-out step `step`.
struct stream_slot {
    std::int32_t step = 0;
    std::int64_t bytes = 0;
};

/// Where balanced bytes are gathered: in the step before their scale-out step (overlapped
/// with the previous stage), or all in step 0 (the paper's balancing step).
enum class gather_timing { just_in_time, up_front };

/// Exclusive prefix sums of the matrix at server granularity: send displacement of the first
/// block rank r sends to server d, and receive displacement of the first block rank r receives
/// from server s. With the tile itself, every block's packed displacement follows. O(R^2).
struct layout_index {
    int ranks = 0;
    int servers = 0;
    std::vector<std::int64_t> send_server; // R x S
    std::vector<std::int64_t> recv_server; // R x S

    void build(const traffic_matrix& m, const topology& topo) {
        ranks = topo.ranks();
        servers = topo.servers;
        const auto r = static_cast<std::size_t>(ranks);
        const auto s = static_cast<std::size_t>(servers);
        const auto g = static_cast<std::size_t>(topo.gpus_per_server);
        send_server.resize(r * s);
        recv_server.resize(r * s);
        std::vector<std::int64_t>& col = column_sums_;
        col.assign(r, 0);
        const std::int64_t* data = m.data();
        for (std::size_t row = 0; row < r; ++row) {
            if (row % g == 0)
                for (std::size_t c = 0; c < r; ++c) recv_server[c * s + row / g] = col[c];
            const std::int64_t* line = data + row * r;
            std::int64_t acc = 0;
            for (std::size_t c = 0; c < r; ++c) {
                if (c % g == 0) send_server[row * s + c / g] = acc;
                acc += line[c];
                col[c] += line[c];
            }
        }
    }

private:
    std::vector<std::int64_t> column_sums_;
};

/// Builds a plan's transfers step by step; reusable across plans (buffers keep their capacity).
class plan_builder {
public:
    void start(const traffic_matrix& m, const topology& topo, std::int32_t last_step) {
        m_ = &m;
        topo_ = topo;
        g_ = topo.gpus_per_server;
        index_.build(m, topo);
        const std::size_t steps = static_cast<std::size_t>(last_step) + 1;
        if (buckets_.size() < steps) buckets_.resize(steps);
        for (std::size_t k = 0; k < steps; ++k) buckets_[k].clear();
        steps_ = steps;
        region_size_.assign(static_cast<std::size_t>(topo.ranks()) * region_count, 0);
        const auto ug = static_cast<std::size_t>(g_);
        send_at_.resize(ug * ug);
        recv_at_.resize(ug * ug);
    }

    /// Computes the packed displacements of every block of tile (s, d).
    void load_tile(int s, int d) {
        s_ = s;
        d_ = d;
        const auto ug = static_cast<std::size_t>(g_);
        const auto us = static_cast<std::size_t>(topo_.servers);
        const auto r = static_cast<std::size_t>(topo_.ranks());
        tile_ = m_->data() + static_cast<std::size_t>(s) * ug * r + static_cast<std::size_t>(d) * ug;
        for (std::size_t a = 0; a < ug; ++a) {
            const std::size_t src = static_cast<std::size_t>(s) * ug + a;
            std::int64_t at = index_.send_server[src * us + static_cast<std::size_t>(d)];
            for (std::size_t b = 0; b < ug; ++b) {
                send_at_[a * ug + b] = at;
                at += tile_[a * r + b];
            }
        }
        for (std::size_t b = 0; b < ug; ++b) {
            const std::size_t dst = static_cast<std::size_t>(d) * ug + b;
            std::int64_t at = index_.recv_server[dst * us + static_cast<std::size_t>(s)];
            for (std::size_t a = 0; a < ug; ++a) {
                recv_at_[a * ug + b] = at;
                at += tile_[a * r + b];
            }
        }
    }

    [[nodiscard]] const std::int64_t* tile() const noexcept { return tile_; }
    [[nodiscard]] std::size_t tile_stride() const noexcept { return static_cast<std::size_t>(topo_.ranks()); }

    /// Direct scale-up copies of the loaded (intra-server) tile, all in `step`.
    void emit_intra_tile(std::int32_t step) {
        const auto ug = static_cast<std::size_t>(g_);
        const std::size_t stride = tile_stride();
        for (std::size_t a = 0; a < ug; ++a)
            for (std::size_t b = 0; b < ug; ++b) {
                const std::int64_t n = tile_[a * stride + b];
                if (n == 0) continue;
                emit(step, rank(s_, a), buffer::send, send_at_[a * ug + b], rank(d_, b), buffer::recv,
                     recv_at_[a * ug + b], n, tier::scale_up);
            }
    }

    /// Emits the (pair, rail) stream `pieces` of the loaded tile over `slots` (in step order;
    /// their bytes must add up to the pieces' bytes).
    void emit_stream(int rail, std::span<const piece> pieces, std::span<const stream_slot> slots,
                     gather_timing timing) {
        const auto ug = static_cast<std::size_t>(g_);
        const auto ui = static_cast<std::size_t>(rail);
        const int carrier = rank(s_, ui);
        const int receiver = rank(d_, ui);
        std::size_t p = 0;
        std::int64_t used = 0; // bytes of pieces[p] already sent
        for (const stream_slot& slot : slots) {
            const std::int32_t gather_step = timing == gather_timing::up_front ? 0 : slot.step - 1;
            const region g_region = timing == gather_timing::up_front ? region::staged
                                                                      : gather_region(gather_step);
            const region l_region = landing_region(slot.step);
            std::int64_t& staged = size_of(carrier, region::staged);
            std::int64_t gathered = timing == gather_timing::up_front ? staged : 0;
            std::int64_t landed = 0;
            std::int64_t left = slot.bytes;
            while (left > 0) {
                if (p >= pieces.size())
                    throw invalid_argument("internal: a stream has fewer bytes than its slots");
                const piece& pc = pieces[p];
                const std::int64_t n = std::min(pc.bytes - used, left);
                const auto a = static_cast<std::size_t>(pc.origin);
                const auto b = static_cast<std::size_t>(pc.final);
                const std::int64_t at = pc.offset + used;
                buffer src_buf = buffer::send;
                std::int64_t src_off = send_at_[a * ug + b] + at;
                if (a != ui) {
                    const std::int64_t off = encode_offset(g_region, gathered);
                    emit(gather_step, rank(s_, a), buffer::send, src_off, carrier, buffer::scratch,
                         off, n, tier::scale_up);
                    src_buf = buffer::scratch;
                    src_off = off;
                    gathered += n;
                }
                if (b == ui) {
                    emit(slot.step, carrier, src_buf, src_off, receiver, buffer::recv,
                         recv_at_[a * ug + b] + at, n, tier::scale_out);
                } else {
                    const std::int64_t off = encode_offset(l_region, landed);
                    emit(slot.step, carrier, src_buf, src_off, receiver, buffer::scratch, off, n,
                         tier::scale_out);
                    emit(slot.step + 1, receiver, buffer::scratch, off, rank(d_, b), buffer::recv,
                         recv_at_[a * ug + b] + at, n, tier::scale_up);
                    landed += n;
                }
                used += n;
                left -= n;
                if (used == pc.bytes) {
                    ++p;
                    used = 0;
                }
            }
            if (timing == gather_timing::up_front) {
                staged = gathered;
            } else {
                std::int64_t& g = size_of(carrier, g_region);
                g = std::max(g, gathered);
            }
            std::int64_t& l = size_of(receiver, l_region);
            l = std::max(l, landed);
        }
    }

    /// Concatenates the steps (dropping empty ones) into `out`, lays out each rank's scratch
    /// regions and resolves the region-relative offsets.
    void finish(plan& out) {
        const auto r = static_cast<std::size_t>(topo_.ranks());
        out.scratch_bytes.assign(r, 0);
        // Region bases per rank, in region order.
        for (std::size_t k = 0; k < r; ++k) {
            std::int64_t base = 0;
            for (int q = 0; q < region_count; ++q) {
                std::int64_t& size = region_size_[k * region_count + static_cast<std::size_t>(q)];
                const std::int64_t n = size;
                if (n > region_mask) throw invalid_argument("scratch of one rank exceeds 2^58 bytes");
                size = base; // now the base
                base += n;
            }
            out.scratch_bytes[k] = base;
        }
        std::size_t total = 0;
        for (std::size_t k = 0; k < steps_; ++k) total += buckets_[k].size();
        out.transfers.clear();
        out.transfers.reserve(total);
        out.step_offsets.assign(1, 0);
        for (std::size_t k = 0; k < steps_; ++k) {
            if (buckets_[k].empty()) continue;
            for (transfer t : buckets_[k]) {
                if (t.src_buffer == buffer::scratch) t.src_offset = resolve(t.src, t.src_offset);
                if (t.dst_buffer == buffer::scratch) t.dst_offset = resolve(t.dst, t.dst_offset);
                out.transfers.push_back(t);
            }
            out.end_step();
        }
    }

private:
    [[nodiscard]] int rank(int server, std::size_t local) const noexcept {
        return server * g_ + static_cast<int>(local);
    }
    std::int64_t& size_of(int rank, region q) noexcept {
        return region_size_[static_cast<std::size_t>(rank) * region_count + static_cast<std::size_t>(q)];
    }
    [[nodiscard]] std::int64_t resolve(int rank, std::int64_t encoded) const noexcept {
        const auto q = static_cast<std::size_t>(encoded >> region_shift);
        return region_size_[static_cast<std::size_t>(rank) * region_count + q] + (encoded & region_mask);
    }

    void emit(std::int32_t step, int src, buffer sb, std::int64_t so, int dst, buffer db,
              std::int64_t dof, std::int64_t bytes, tier t) {
        std::vector<transfer>& bucket = buckets_[static_cast<std::size_t>(step)];
        if (!bucket.empty()) {
            transfer& last = bucket.back();
            if (last.src == src && last.dst == dst && last.tier == t && last.src_buffer == sb &&
                last.dst_buffer == db && last.src_offset + last.bytes == so &&
                last.dst_offset + last.bytes == dof) {
                last.bytes += bytes;
                return;
            }
        }
        transfer x;
        x.bytes = bytes;
        x.src_offset = so;
        x.dst_offset = dof;
        x.src = src;
        x.dst = dst;
        x.tier = t;
        x.src_buffer = sb;
        x.dst_buffer = db;
        bucket.push_back(x);
    }

    const traffic_matrix* m_ = nullptr;
    topology topo_;
    int g_ = 1;
    int s_ = 0;
    int d_ = 0;
    const std::int64_t* tile_ = nullptr;
    layout_index index_;
    std::vector<std::int64_t> send_at_;
    std::vector<std::int64_t> recv_at_;
    std::vector<std::vector<transfer>> buckets_;
    std::size_t steps_ = 0;
    std::vector<std::int64_t> region_size_;
};

} // namespace fast::detail
