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
// When scale-up work happens:
//   - up front (the paper): every gather in step 0, every redistribution in the step after its
//     scale-out, intra-server blocks in step 1;
//   - in windows: the gathers for step k in one of steps k - W .. k - 1, the redistribution of
//     step k in one of k + 1 .. k + W, intra-server blocks in any scale-out step; each goes to the
//     step where both of its GPUs' scale-up ports have the most room left under that step's
//     scale-out (greedy, in emission order).
//
// Scratch: every slot that needs staging gets regions of its own: at the carrier for the bytes
// gathered for it, at the receiver for the bytes that land on the wrong GPU (and, up front, one
// region per carrier for everything balanced in step 0). A region lives from the first step
// that writes it to the last step that reads it; within a step only one stream writes it
// (scale-out is one-to-one), so a cursor places bytes. When all regions and lifetimes are known,
// finish() lays out each rank's regions first-fit by lifetime: regions alive in overlapping
// steps never share bytes (a step that reads one never writes another in the same place), and
// the others reuse the same memory. Offsets stay relative to their region until then; each
// record keeps its regions beside it.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "../balance.hpp"
#include "checked.hpp"
#include "../error.hpp"
#include "../plan.hpp"
#include "../traffic.hpp"

namespace fast::detail {

inline constexpr int max_window = 64;

/// One slot's share of a (pair, rail) stream: `bytes` leave in scale-out step `step`.
struct stream_slot {
    std::int32_t step = 0;
    std::int64_t bytes = 0;
};

/// When balancing and redistribution happen (see the file comment).
enum class gather_timing { windowed, up_front };

/// Exclusive prefix sums of the matrix at server granularity: send displacement of the first
/// block rank r sends to server d, and receive displacement of the first block rank r receives
/// from server s. With the tile itself, every block's packed displacement follows. O(R^2).
struct layout_index {
    std::vector<std::int64_t> send_server; // R x S: [rank * S + server]
    std::vector<std::int64_t> recv_server; // S x R: [server * R + rank]

    void build(const traffic_matrix& m, const topology& topo) {
        const auto r = static_cast<std::size_t>(topo.ranks());
        const auto s = static_cast<std::size_t>(topo.servers);
        const auto g = static_cast<std::size_t>(topo.gpus_per_server);
        send_server.resize(r * s);
        recv_server.resize(r * s);
        column_sums_.assign(r, 0);
        const std::int64_t* data = m.data();
        for (std::size_t row = 0; row < r; ++row) {
            if (row % g == 0)
                std::copy(column_sums_.begin(), column_sums_.end(), recv_server.begin() + static_cast<std::ptrdiff_t>(row / g * r));
            const std::int64_t* line = data + row * r;
            std::int64_t acc = 0;
            for (std::size_t d = 0; d < s; ++d) {
                send_server[row * s + d] = acc;
                for (std::size_t c = d * g; c < (d + 1) * g; ++c) {
                    acc += line[c];
                    column_sums_[c] += line[c];
                }
            }
        }
    }

    /// Bytes each rank receives in all (valid after build).
    [[nodiscard]] const std::vector<std::int64_t>& column_sums() const noexcept { return column_sums_; }

private:
    std::vector<std::int64_t> column_sums_;
};

/// Builds a plan's transfers step by step; reusable across plans (buffers keep their capacity).
class plan_builder {
    // Region 0 is no region: an end outside scratch, at base 0 (so offsets resolve without a
    // branch on whether an end is in scratch).
    static constexpr std::uint32_t no_region = 0;
    // A transfer being built (per step, in emission order): the regions of its scratch ends (no_region
    // where an end is not in scratch) stay beside it until finish() knows every region's base.
    struct record {
        transfer t;
        std::uint32_t src_region;
        std::uint32_t dst_region;
    };

public:
    /// Starts a plan with steps 0 .. last_step + 1 (step 0 and the step after the last
    /// scale-out step carry only scale-up work). `step_bytes[k]` is the length of scale-out step
    /// k in bytes (k = 1 .. last_step), the room scale-up work may fill at B_up / B_out.
    void start(const traffic_matrix& m, const topology& topo, std::int32_t last_step,
               gather_timing timing, int window, std::span<const std::int64_t> step_bytes) {
        if (window < 1 || window > max_window)
            throw invalid_argument("window must be between 1 and " + std::to_string(max_window) +
                                   ", got " + std::to_string(window));
        m_ = &m;
        topo_ = topo;
        g_ = topo.gpus_per_server;
        timing_ = timing;
        window_ = timing == gather_timing::up_front ? 1 : window;
        last_ = last_step;
        index_.build(m, topo);
        heat_rank_.resize(static_cast<std::size_t>(topo.ranks()));
        for (int d = 0; d < topo.servers; ++d) {
            const std::size_t at = static_cast<std::size_t>(d) * static_cast<std::size_t>(g_);
            descending_ranks(std::span<const std::int64_t>(index_.column_sums().data() + at, static_cast<std::size_t>(g_)),
                             std::span<std::uint32_t>(heat_rank_.data() + at, static_cast<std::size_t>(g_)));
        }
        steps_ = static_cast<std::size_t>(last_step) + 2;
        if (buckets_.size() < steps_) buckets_.resize(steps_);
        for (std::size_t k = 0; k < steps_; ++k) buckets_[k].clear();
        regions_.assign(1, region{});
        staged_region_.assign(static_cast<std::size_t>(topo.ranks()), no_region);
        const double ratio = topo.scale_up_gbps / topo.scale_out_gbps;
        capacity_.assign(steps_, 0);
        for (std::size_t k = 1; k < steps_ && k < step_bytes.size(); ++k)
            capacity_[k] = saturate(static_cast<double>(step_bytes[k]) * ratio);
        if (timing == gather_timing::windowed) {
            const auto r = static_cast<std::size_t>(topo.ranks());
            room_send_.resize(r * steps_);
            room_recv_.resize(r * steps_);
            for (std::size_t k = 0; k < r; ++k) {
                std::copy(capacity_.begin(), capacity_.end(), room_send_.begin() + static_cast<std::ptrdiff_t>(k * steps_));
                std::copy(capacity_.begin(), capacity_.end(), room_recv_.begin() + static_cast<std::ptrdiff_t>(k * steps_));
            }
        }
        const auto ug = static_cast<std::size_t>(g_);
        tile_.resize(ug * ug);
        send_at_.resize(ug * ug);
        recv_at_.resize(ug * ug);
        gather_step_of_.resize(ug);
        scatter_step_of_.resize(ug);
        gather_stamp_.assign(ug, 0);
        scatter_stamp_.assign(ug, 0);
        stamp_ = 0;
    }

    /// Copies tile (s, d) out of the matrix (its rows are far apart there) and computes the
    /// packed displacements of every block.
    void load_tile(int s, int d) {
        s_ = s;
        d_ = d;
        const auto ug = static_cast<std::size_t>(g_);
        const auto us = static_cast<std::size_t>(topo_.servers);
        const auto r = static_cast<std::size_t>(topo_.ranks());
        const std::int64_t* from = m_->data() + static_cast<std::size_t>(s) * ug * r + static_cast<std::size_t>(d) * ug;
        std::int64_t* tile = tile_.data();
        for (std::size_t a = 0; a < ug; ++a) {
            const std::size_t src = static_cast<std::size_t>(s) * ug + a;
            std::int64_t at = index_.send_server[src * us + static_cast<std::size_t>(d)];
            for (std::size_t b = 0; b < ug; ++b) {
                const std::int64_t n = from[a * r + b];
                tile[a * ug + b] = n;
                send_at_[a * ug + b] = at;
                at += n;
            }
        }
        for (std::size_t b = 0; b < ug; ++b) {
            const std::size_t dst = static_cast<std::size_t>(d) * ug + b;
            std::int64_t at = index_.recv_server[static_cast<std::size_t>(s) * r + dst];
            for (std::size_t a = 0; a < ug; ++a) {
                recv_at_[a * ug + b] = at;
                at += tile[a * ug + b];
            }
        }
    }

    /// The loaded tile, G x G (tile_stride() between rows).
    [[nodiscard]] const std::int64_t* tile() const noexcept { return tile_.data(); }
    /// The GPUs of the loaded tile's destination server ranked by how much each receives in
    /// all, hottest first (see descending_ranks).
    [[nodiscard]] std::span<const std::uint32_t> destination_heat() const noexcept {
        return {heat_rank_.data() + static_cast<std::size_t>(d_) * static_cast<std::size_t>(g_),
                static_cast<std::size_t>(g_)};
    }
    [[nodiscard]] std::size_t tile_stride() const noexcept { return static_cast<std::size_t>(g_); }

    /// Direct scale-up copies of the loaded (intra-server) tile: in step 1 up front, else each
    /// block in the scale-out step with the most room for both of its ports.
    void emit_intra_tile() {
        const auto ug = static_cast<std::size_t>(g_);
        const std::size_t stride = tile_stride();
        const std::int32_t first = 1;
        const std::int32_t last = std::max(1, last_);
        for (std::size_t a = 0; a < ug; ++a)
            for (std::size_t b = 0; b < ug; ++b) {
                const std::int64_t n = tile_[a * stride + b];
                if (n == 0) continue;
                const int src = rank(s_, a);
                const int dst = rank(d_, b);
                if (timing_ == gather_timing::up_front)
                    emit_up<false>(1, src, buffer::send, no_region, send_at_[a * ug + b], dst, buffer::recv,
                                   no_region, recv_at_[a * ug + b], n);
                else
                    emit_up<true>(roomiest<false>(src, dst, first, last), src, buffer::send, no_region,
                                  send_at_[a * ug + b], dst, buffer::recv, no_region, recv_at_[a * ug + b], n);
            }
    }

    /// Emits the (pair, rail) stream `pieces` of the loaded tile over `slots` (in step order;
    /// their bytes must add up to the pieces' bytes).
    void emit_stream(int rail, std::span<const piece> pieces, std::span<const stream_slot> slots) {
        if (timing_ == gather_timing::up_front) emit_stream<true>(rail, pieces, slots);
        else emit_stream<false>(rail, pieces, slots);
    }

    /// Concatenates the steps into `out` (dropping empty ones unless `keep_empty_steps`: a
    /// server's slice keeps them so that all slices number steps alike), lays out each rank's
    /// scratch regions and resolves the region-relative offsets.
    void finish(plan& out, bool keep_empty_steps = false) {
        const auto r = static_cast<std::size_t>(topo_.ranks());
        layout_regions(r);
        out.scratch_bytes.assign(r, 0);
        for (const region& x : regions_)
            out.scratch_bytes[static_cast<std::size_t>(x.rank)] =
                std::max(out.scratch_bytes[static_cast<std::size_t>(x.rank)], checked_add(x.base, x.size, "scratch of one rank"));
        // The steps' records in order (sequential writes: a plan is large), offsets resolved.
        out.step_offsets.assign(1, 0);
        std::size_t total = 0;
        for (std::size_t k = 0; k < steps_; ++k) {
            total += buckets_[k].size();
            if (!buckets_[k].empty() || keep_empty_steps) out.step_offsets.push_back(total);
        }
        out.transfers.resize(total); // a reused plan keeps its size: nothing to initialise
        transfer* y = out.transfers.data();
        for (std::size_t k = 0; k < steps_; ++k)
            for (const record& x : buckets_[k]) {
                *y = x.t;
                y->src_offset += regions_[x.src_region].base;
                y->dst_offset += regions_[x.dst_region].base;
                ++y;
            }
    }

private:
    [[nodiscard]] int rank(int server, std::size_t local) const noexcept {
        return server * g_ + static_cast<int>(local);
    }
    // A scratch region of `rank`, alive from step `first` to step `last`.
    struct region {
        std::int64_t size = 0;
        std::int64_t base = 0;
        std::int32_t rank = 0;
        std::int32_t first = 0;
        std::int32_t last = 0;
    };

    template <bool up_front>
    void emit_stream(int rail, std::span<const piece> pieces, std::span<const stream_slot> slots) {
        const auto ug = static_cast<std::size_t>(g_);
        const auto ui = static_cast<std::size_t>(rail);
        const int origins = s_ * g_; // rank of GPU 0 of the source server
        const int finals = d_ * g_;
        const int carrier = origins + rail;
        const int receiver = finals + rail;
        const piece* pc = pieces.data();
        const piece* const end = pc + pieces.size();
        std::int64_t used = 0; // bytes of *pc already sent
        for (const stream_slot& slot : slots) {
            // This slot's regions, created on first use.
            std::uint32_t g_region = no_region;
            std::uint32_t l_region = no_region;
            std::int64_t gathered = 0;
            std::int64_t landed = 0;
            if constexpr (up_front) {
                std::uint32_t& staged = staged_region_[static_cast<std::size_t>(carrier)];
                if (staged == no_region) staged = new_region(carrier, 0, slot.step);
                g_region = staged;
                gathered = regions_[g_region].size;
                regions_[g_region].last = std::max(regions_[g_region].last, slot.step);
            }
            // One placement decision per origin (gathers) and per final GPU (redistribution) of
            // the slot, remembered under this slot's stamp.
            ++stamp_;
            // The slot's open transfers, which a contiguous piece extends: its scale-out, and with
            // windowed timing its last gather and last redistribution. While the slot is emitted
            // nothing else goes into their steps (gathers go before its step, redistribution
            // after it, and a carrier sends to one receiver per step), and its gather and landing
            // regions are its own, so each stays its step's last record: it is extended there,
            // with no index kept. (Up front, every slot of a carrier gathers into one region: gathers
            // there extend whatever their step's last transfer is.)
            bool out_open = false; // the slot's scale-out so far is its step's last record
            open_move gather;  // keyed by origin, ending in its send buffer
            open_move scatter; // keyed by final GPU, ending in its receive buffer
            std::int64_t left = slot.bytes;
            while (left > 0) {
                if (pc == end) throw invalid_argument("internal: a stream has fewer bytes than its slots");
                const std::int64_t n = std::min(pc->bytes - used, left);
                const auto a = static_cast<std::size_t>(pc->origin);
                const auto b = static_cast<std::size_t>(pc->final);
                const std::int64_t at = pc->offset + used;
                buffer src_buf = buffer::send;
                std::uint32_t src_region = no_region;
                std::int64_t src_off = send_at_[a * ug + b] + at;
                if (a != ui) {
                    const int origin = origins + pc->origin;
                    if (gather_stamp_[a] != stamp_) decide_gather<up_front>(a, origin, carrier, slot.step, g_region);
                    emit_move<up_front>(gather, a, src_off, gather_step_of_[a], origin, buffer::send, no_region, src_off,
                                        carrier, buffer::scratch, g_region, gathered, n);
                    src_buf = buffer::scratch;
                    src_region = g_region;
                    src_off = gathered;
                    gathered += n;
                }
                buffer dst_buf = buffer::recv;
                std::uint32_t dst_region = no_region;
                std::int64_t dst_off = recv_at_[a * ug + b] + at;
                if (b != ui) {
                    const int final_rank = finals + pc->final;
                    if (scatter_stamp_[b] != stamp_) decide_scatter<up_front>(b, receiver, final_rank, slot.step, l_region);
                    emit_move<up_front>(scatter, b, dst_off, scatter_step_of_[b], receiver, buffer::scratch, l_region,
                                        landed, final_rank, buffer::recv, no_region, dst_off, n);
                    dst_buf = buffer::scratch;
                    dst_region = l_region;
                    dst_off = landed;
                    landed += n;
                }
                if (out_open) {
                    record& o = buckets_[static_cast<std::size_t>(slot.step)].back();
                    if (o.t.src_buffer == src_buf && o.t.dst_buffer == dst_buf && o.src_region == src_region &&
                        o.dst_region == dst_region && o.t.src_offset + o.t.bytes == src_off &&
                        o.t.dst_offset + o.t.bytes == dst_off) {
                        o.t.bytes += n;
                        goto next;
                    }
                }
                out_open = true;
                append(slot.step, n, carrier, src_buf, src_region, src_off, receiver, dst_buf, dst_region, dst_off,
                       tier::scale_out);
            next:
                used += n;
                left -= n;
                if (used == pc->bytes) {
                    ++pc;
                    used = 0;
                }
            }
            if (g_region != no_region) regions_[g_region].size = gathered;
            if (l_region != no_region) regions_[l_region].size = landed;
        }
    }

    std::uint32_t new_region(int rank, std::int32_t first, std::int32_t last) {
        if (regions_.size() > UINT32_MAX) throw invalid_argument("a plan with more than 2^32 scratch regions");
        regions_.push_back({0, 0, rank, first, last});
        return static_cast<std::uint32_t>(regions_.size() - 1);
    }

    // Gives every region a base: per rank, in order of first step (longer-lived and larger
    // first), at the lowest offset free of every region whose lifetime overlaps its own.
    void layout_regions(std::size_t ranks) {
        by_rank_.assign(ranks + 1, 0);
        for (std::size_t k = 1; k < regions_.size(); ++k) ++by_rank_[static_cast<std::size_t>(regions_[k].rank) + 1];
        for (std::size_t k = 0; k < ranks; ++k) by_rank_[k + 1] += by_rank_[k];
        order_.resize(regions_.size() - 1);
        fill_.assign(by_rank_.begin(), by_rank_.end() - 1);
        for (std::uint32_t k = 1; k < regions_.size(); ++k) order_[fill_[static_cast<std::size_t>(regions_[k].rank)]++] = k;
        for (std::size_t k = 0; k < ranks; ++k) {
            const auto first = order_.begin() + static_cast<std::ptrdiff_t>(by_rank_[k]);
            const auto last = order_.begin() + static_cast<std::ptrdiff_t>(by_rank_[k + 1]);
            std::sort(first, last, [&](std::uint32_t x, std::uint32_t y) {
                const region& a = regions_[x];
                const region& b = regions_[y];
                if (a.first != b.first) return a.first < b.first;
                if (a.last != b.last) return a.last > b.last;
                if (a.size != b.size) return a.size > b.size;
                return x < y;
            });
            active_.clear(); // placed regions that may still overlap, by base
            for (auto it = first; it != last; ++it) {
                region& x = regions_[*it];
                // Regions that ended before this one starts no longer constrain it.
                active_.erase(std::remove_if(active_.begin(), active_.end(),
                                             [&](std::uint32_t y) { return regions_[y].last < x.first; }),
                              active_.end());
                std::int64_t base = 0;
                for (const std::uint32_t y : active_) { // sorted by base
                    const region& z = regions_[y];
                    if (z.size == 0) continue;
                    if (base + x.size <= z.base) break;
                    base = std::max(base, z.base + z.size);
                }
                x.base = base;
                active_.insert(std::upper_bound(active_.begin(), active_.end(), *it,
                                                [&](std::uint32_t y, std::uint32_t z) {
                                                    return regions_[y].base < regions_[z].base;
                                                }),
                               *it);
            }
        }
    }

    // The step in [first, last] with the most scale-up room left (under that step's scale-out)
    // for src's send and dst's receive port; ties go to the latest step when `late` (gathers:
    // less time in scratch), else the earliest.
    template <bool late>
    [[nodiscard]] std::int32_t roomiest(int src, int dst, std::int32_t first, std::int32_t last) const noexcept {
        const std::int64_t* send = room_send_.data() + static_cast<std::size_t>(src) * steps_;
        const std::int64_t* recv = room_recv_.data() + static_cast<std::size_t>(dst) * steps_;
        // The first step met in scan order wins ties: the latest when `late`.
        std::int32_t best = late ? last : first;
        std::int64_t best_room = std::min(send[best], recv[best]);
        for (std::int32_t j = 1; j <= last - first; ++j) {
            const std::int32_t k = late ? last - j : first + j;
            const std::int64_t r = std::min(send[k], recv[k]);
            best = r > best_room ? k : best;
            best_room = std::max(best_room, r);
        }
        return best;
    }

    // The step of the slot's gathers from origin GPU `a` (gathers in one of the `window` steps
    // before the slot's, the roomiest), its region created on first use. Out of line: once per
    // origin and slot, and the emission loop stays small.
    template <bool up_front>
    __attribute__((noinline)) void decide_gather(std::size_t a, int origin, int carrier, std::int32_t slot_step,
                                                 std::uint32_t& g_region) {
        gather_stamp_[a] = stamp_;
        std::int32_t step = 0;
        if constexpr (!up_front) step = roomiest<true>(origin, carrier, std::max(0, slot_step - window_), slot_step - 1);
        gather_step_of_[a] = step;
        if (g_region == no_region) g_region = new_region(carrier, step, slot_step);
        regions_[g_region].first = std::min(regions_[g_region].first, step);
    }

    // Likewise the step of the redistribution to final GPU `b` (one of the `window` steps after).
    template <bool up_front>
    __attribute__((noinline)) void decide_scatter(std::size_t b, int receiver, int final_rank, std::int32_t slot_step,
                                                  std::uint32_t& l_region) {
        scatter_stamp_[b] = stamp_;
        std::int32_t step = slot_step + 1;
        if constexpr (!up_front)
            step = roomiest<false>(receiver, final_rank, slot_step + 1, std::min(slot_step + window_, last_ + 1));
        scatter_step_of_[b] = step;
        if (l_region == no_region) l_region = new_region(receiver, slot_step, step);
        regions_[l_region].last = std::max(regions_[l_region].last, step);
    }

    // A slot's last gather or redistribution: the next piece extends it when it moves to or from
    // the same GPU (`key`) at the offset where this one ended (`end`; the scratch end is
    // contiguous by construction).
    struct open_move {
        std::int32_t step = -1; // its step (its record is that step's last), or -1: none yet
        std::size_t key = 0;
        std::int64_t end = 0;
    };

    // A gather or redistribution of a stream's piece (see emit_stream's open transfers); the
    // offset `tracked` is the one at its key's end.
    template <bool up_front>
    void emit_move(open_move& open, std::size_t key, std::int64_t tracked, std::int32_t step, int src, buffer sb,
                   std::uint32_t sr, std::int64_t so, int dst, buffer db, std::uint32_t dr, std::int64_t dof,
                   std::int64_t n) {
        if constexpr (up_front) {
            emit_up<false>(step, src, sb, sr, so, dst, db, dr, dof, n);
        } else {
            count_up(step, src, dst, n);
            if (open.step == step && open.key == key && open.end == tracked)
                buckets_[static_cast<std::size_t>(step)].back().t.bytes += n;
            else
                append(step, n, src, sb, sr, so, dst, db, dr, dof, tier::scale_up);
            open.step = step;
            open.key = key;
            open.end = tracked + n;
        }
    }

    // Takes scale-up bytes off src's send and dst's receive room in step `step`.
    void count_up(std::int32_t step, int src, int dst, std::int64_t bytes) noexcept {
        room_send_[static_cast<std::size_t>(src) * steps_ + static_cast<std::size_t>(step)] -= bytes;
        room_recv_[static_cast<std::size_t>(dst) * steps_ + static_cast<std::size_t>(step)] -= bytes;
    }

    // A scale-up transfer into step `step`: extends the step's last transfer when contiguous
    // with it, and (with `load`: windowed timing) counts its bytes against both ports.
    template <bool load>
    void emit_up(std::int32_t step, int src, buffer sb, std::uint32_t sr, std::int64_t so, int dst, buffer db,
                 std::uint32_t dr, std::int64_t dof, std::int64_t bytes) {
        if constexpr (load) count_up(step, src, dst, bytes);
        if (std::vector<record>& b = buckets_[static_cast<std::size_t>(step)]; !b.empty()) {
            record& last = b.back();
            transfer& l = last.t;
            if (l.src == src && l.dst == dst && l.src_offset + l.bytes == so && l.dst_offset + l.bytes == dof &&
                last.src_region == sr && last.dst_region == dr && l.tier == tier::scale_up && l.src_buffer == sb &&
                l.dst_buffer == db) {
                l.bytes += bytes;
                return;
            }
        }
        append(step, bytes, src, sb, sr, so, dst, db, dr, dof, tier::scale_up);
    }

    // Adds a transfer to step `step` as its last.
    void append(std::int32_t step, std::int64_t bytes, int src, buffer sb, std::uint32_t sr, std::int64_t so,
                int dst, buffer db, std::uint32_t dr, std::int64_t dof, fast::tier t) {
        std::vector<record>& b = buckets_[static_cast<std::size_t>(step)];
        b.push_back(record{transfer{bytes, so, dof, src, dst, t, sb, db}, sr, dr});
    }


    const traffic_matrix* m_ = nullptr;
    topology topo_;
    int g_ = 1;
    int s_ = 0;
    int d_ = 0;
    gather_timing timing_ = gather_timing::windowed;
    int window_ = 1;
    std::int32_t last_ = 0;
    std::vector<std::int64_t> tile_; // the loaded tile, G x G
    layout_index index_;
    std::vector<std::int64_t> send_at_;
    std::vector<std::int64_t> recv_at_;
    std::vector<std::uint32_t> heat_rank_; // per rank: its position by heat within its server
    std::vector<std::int32_t> gather_step_of_;  // per origin GPU, within one slot
    std::vector<std::int32_t> scatter_step_of_; // per final GPU, within one slot
    std::vector<std::uint64_t> gather_stamp_;   // per origin GPU: the slot whose step it holds
    std::vector<std::uint64_t> scatter_stamp_;  // per final GPU: likewise
    std::uint64_t stamp_ = 0;                   // the slot being emitted
    std::vector<std::vector<record>> buckets_; // per step, in emission order
    std::size_t steps_ = 0;
    std::vector<std::int64_t> capacity_; // per step: scale-up bytes that fit under its scale-out
    // rank x step: room left on its send (receive) port, the step's capacity less the scale-up
    // bytes placed there (kept as room, so that a step's choice is one minimum per step).
    std::vector<std::int64_t> room_send_;
    std::vector<std::int64_t> room_recv_;
    std::vector<region> regions_;
    std::vector<std::uint32_t> staged_region_; // per rank: its up-front region, or no_region
    std::vector<std::size_t> by_rank_;
    std::vector<std::size_t> fill_;
    std::vector<std::uint32_t> order_;
    std::vector<std::uint32_t> active_;
};

} // namespace fast::detail
