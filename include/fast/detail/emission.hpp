#pragma once
// Emission (the planner's stage 5): turns a stage schedule into transfers. The schedule says, for every rail and
// scale-out step, how many bytes each server sends to which server; balancing (assign_tile) says which bytes of a tile
// each rail carries, in stream order. The builder walks every (server pair, rail) stream across that stream's slots and
// emits, per slice of a piece:
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
// finish() lays out each rank's regions first-fit by lifetime (scratch_layout.hpp). Offsets stay
// relative to their region until then; each record keeps its regions beside it.
//
// One rank's part (a focus rank): only the tiles with an end in the rank's server are walked,
// in the whole plan's order, and only the rank's own transfers are kept. Where scale-up work
// goes depends on every GPU of the server (each move takes room on two ports), so the server's
// gathers (tiles it sends) and redistributions (tiles it receives) are all placed, as in the
// whole plan; those of the other end's server are not (they never share a port with this
// server). Merges are decided as in the whole plan: within a slot nothing else goes into its
// steps, and elsewhere a transfer extends only the last transfer its step has seen. Regions of
// ranks outside the server get ids of their own (never laid out: other ranks' offsets
// read 0 in a rank's program).

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "../counts.hpp"
#include "../error.hpp"
#include "../piece.hpp"
#include "../plan.hpp"
#include "../rank_program.hpp"
#include "assert.hpp"
#include "balancing.hpp"
#include "checked.hpp"
#include "schedule.hpp"
#include "scratch_layout.hpp"
#include "tuning.hpp"

namespace fast::detail {

/// When balancing and redistribution happen (see the file comment).
enum class gather_timing { windowed, up_front };

/// How the emission runs, fixed per plan (compile-time in the inner loops): scale-up work up
/// front or in windows, the whole plan or one rank's part, blocks split or not.
struct emit_mode {
    bool up_front = false;
    bool focus = false;
    bool split = false;
};

/// What plan_builder::start needs besides the schedule.
struct emission_options {
    gather_timing timing = gather_timing::windowed;
    int window = 1;            ///< steps before (gathers) and after (redistribution) a slot's
    int focus = -1;            ///< the rank whose part is built, or -1 for the whole plan
    bool split_blocks = false; ///< no transfer carries bytes of two blocks
};

/// Builds a plan's transfers step by step, or one rank's (the focus); reusable across plans
/// (buffers keep their capacity).
class plan_builder {
    // Region 0 is no region: an end outside scratch, at base 0 (so offsets resolve without a
    // branch on whether an end is in scratch). Ids from foreign_region up name regions of ranks
    // outside the focus rank's server, which have no record.
    static constexpr std::uint32_t no_region = 0;
    static constexpr std::uint32_t foreign_region = std::uint32_t{1} << 31;
    static constexpr std::size_t none = static_cast<std::size_t>(-1);
    // The block a transfer's bytes belong to (origin and final rank), for plans whose transfers
    // stay within one block.
    struct block_key {
        std::int32_t origin = -1;
        std::int32_t final = -1;
        friend bool operator==(const block_key&, const block_key&) = default;
    };
    // A transfer being built (per step, in emission order): the regions of its scratch ends
    // (no_region where an end is not in scratch) stay beside it until finish() knows every
    // region's base.
    struct record {
        fast::transfer transfer;
        std::uint32_t src_region;
        std::uint32_t dst_region;
    };

public:
    /// Starts a plan with steps 0 .. last_step + 1 (step 0 and the step after the last
    /// scale-out step carry only scale-up work). `step_bytes[k]` is the length of scale-out step
    /// k in bytes (k = 1 .. last_step), the room scale-up work may fill at B_up / B_out; `gpus`
    /// are every rank's totals (shared_counts), whose receives rank the destinations by heat.
    void start(std::span<const gpu_totals> gpus, const topology& topo, std::span<const std::int64_t> step_bytes,
               std::int32_t last_step, const emission_options& options) {
        FAST_ASSERT(options.window >= 1 && options.window <= tuning::max_window,
                    "the window was validated with the options");
        topo_ = topo;
        gpus_ = topo.gpus_per_server;
        timing_ = options.timing;
        window_ = options.timing == gather_timing::up_front ? 1 : options.window;
        last_step_ = last_step;
        focus_ = options.focus;
        focus_server_ = focus_ >= 0 ? topo.server_of(focus_) : -1;
        split_blocks_ = options.split_blocks;
        const auto r = static_cast<std::size_t>(topo.ranks());
        const auto ug = static_cast<std::size_t>(gpus_);
        rank_heat(gpus);
        steps_ = static_cast<std::size_t>(last_step) + 2;
        if (buckets_.size() < steps_) buckets_.resize(steps_);
        for (std::size_t k = 0; k < steps_; ++k) buckets_[k].clear();
        last_kept_.assign(steps_, none);
        if (split_blocks_) last_block_.assign(steps_, block_key{});
        regions_.assign(1, region{});
        next_foreign_ = foreign_region;
        staged_region_.assign(r, no_region);
        reset_rooms(step_bytes);
        tile_.resize(ug * ug);
        send_at_.resize(ug * ug);
        recv_at_.resize(ug * ug);
        gather_step_of_.resize(ug);
        scatter_step_of_.resize(ug);
        gather_stamp_.assign(ug, 0);
        scatter_stamp_.assign(ug, 0);
        stamp_ = 0;
    }

    /// Copies tile (s, d) (block (a, b) at tile[a * stride + b]; its rows are far apart in a
    /// matrix) and computes the packed displacements of every block: origin GPU a's blocks for
    /// d start at send_base[a] in its send buffer, final GPU b's blocks from s at recv_base[b] in
    /// its receive buffer.
    void load_tile(int s, int d, const std::int64_t* tile, std::size_t stride, std::span<const std::int64_t> send_base,
                   std::span<const std::int64_t> recv_base) {
        source_ = s;
        destination_ = d;
        const auto ug = static_cast<std::size_t>(gpus_);
        std::int64_t* own = tile_.data();
        for (std::size_t a = 0; a < ug; ++a) {
            std::int64_t at = send_base[a];
            for (std::size_t b = 0; b < ug; ++b) {
                const std::int64_t n = tile[a * stride + b];
                own[a * ug + b] = n;
                send_at_[a * ug + b] = at;
                at += n;
            }
        }
        for (std::size_t b = 0; b < ug; ++b) {
            std::int64_t at = recv_base[b];
            for (std::size_t a = 0; a < ug; ++a) {
                recv_at_[a * ug + b] = at;
                at += own[a * ug + b];
            }
        }
    }

    /// The loaded tile, G x G (tile_stride() between rows).
    [[nodiscard]] const std::int64_t* tile() const noexcept { return tile_.data(); }
    /// The GPUs of the loaded tile's destination server ranked by how much each receives in
    /// all, hottest first (see descending_ranks).
    [[nodiscard]] std::span<const std::uint32_t> destination_heat() const noexcept {
        return {heat_rank_.data() + static_cast<std::size_t>(destination_) * static_cast<std::size_t>(gpus_),
                static_cast<std::size_t>(gpus_)};
    }
    [[nodiscard]] std::size_t tile_stride() const noexcept { return static_cast<std::size_t>(gpus_); }

    /// Direct scale-up copies of the loaded (intra-server) tile: in step 1 up front, else each
    /// block in the scale-out step with the most room for both of its ports.
    void emit_intra_tile() {
        with_mode([&]<emit_mode M>() { emit_intra_tile<M>(); });
    }

    /// Emits the (pair, rail) stream `pieces` of the loaded tile over `slots` (in step order;
    /// their bytes must add up to the pieces' bytes).
    void emit_stream(int rail, std::span<const piece> pieces, std::span<const stream_slot> slots) {
        with_mode([&]<emit_mode M>() { emit_stream<M>(rail, pieces, slots); });
    }

    /// Concatenates the steps into `out` (dropping empty ones), lays out each rank's scratch
    /// regions and resolves the region-relative offsets. Whole plans only.
    void finish(plan& out) {
        const auto r = static_cast<std::size_t>(topo_.ranks());
        scratch_.lay_out(regions_, r);
        out.scratch_bytes.assign(r, 0);
        for (const region& x : regions_)
            out.scratch_bytes[static_cast<std::size_t>(x.rank)] =
                std::max(out.scratch_bytes[static_cast<std::size_t>(x.rank)],
                         checked_add(x.base, x.size, "scratch of one rank"));
        // The steps' records in order (sequential writes: a plan is large), offsets resolved.
        out.step_offsets.assign(1, 0);
        std::size_t total = 0;
        for (std::size_t k = 0; k < steps_; ++k) {
            total += buckets_[k].size();
            if (!buckets_[k].empty()) out.step_offsets.push_back(total);
        }
        out.transfers.resize(total); // a reused plan keeps its size: nothing to initialise
        transfer* y = out.transfers.data();
        for (std::size_t k = 0; k < steps_; ++k)
            for (const record& x : buckets_[k]) {
                *y = x.transfer;
                y->src_offset += regions_[x.src_region].base;
                y->dst_offset += regions_[x.dst_region].base;
                ++y;
            }
    }

    /// The focus rank's program: its transfers step by step (steps numbered 0 .. last_step + 1
    /// whether or not the whole plan has transfers in them), its scratch laid out, other ranks'
    /// offsets 0, pairs numbered. `counts`: number_pairs' workspace.
    void finish(rank_program& out, std::vector<std::uint32_t>& counts) {
        const std::span<const std::uint32_t> own = scratch_.lay_out_rank(regions_, focus_);
        out.rank = focus_;
        out.topology = topo_;
        out.steps = static_cast<std::uint32_t>(steps_);
        out.one_to_one_scale_out = true;
        out.scratch_bytes = 0;
        for (const std::uint32_t k : own)
            out.scratch_bytes =
                std::max(out.scratch_bytes, checked_add(regions_[k].base, regions_[k].size, "scratch of one rank"));
        out.transfers.clear();
        for (std::size_t k = 0; k < steps_; ++k)
            for (const record& x : buckets_[k]) {
                rank_transfer y{x.transfer, static_cast<std::uint32_t>(k), 0};
                resolve_focus(y.transfer.src, y.transfer.src_buffer, x.src_region, y.transfer.src_offset);
                resolve_focus(y.transfer.dst, y.transfer.dst_buffer, x.dst_region, y.transfer.dst_offset);
                out.transfers.push_back(y);
            }
        number_pairs(out, counts);
    }

private:
    // Heat: what each rank receives in all, ranked per server.
    void rank_heat(std::span<const gpu_totals> gpus) {
        const auto r = static_cast<std::size_t>(topo_.ranks());
        const auto ug = static_cast<std::size_t>(gpus_);
        heat_.resize(r);
        for (std::size_t j = 0; j < r; ++j) heat_[j] = gpus[j].in + gpus[j].up_received;
        heat_rank_.resize(r);
        for (std::size_t at = 0; at < r; at += ug)
            descending_ranks(std::span<const std::int64_t>(heat_.data() + at, ug),
                             std::span<std::uint32_t>(heat_rank_.data() + at, ug));
    }

    // Each step's scale-up capacity (its scale-out length at B_up / B_out) and, with windowed
    // timing, the rooms of the ranks whose moves are placed: all, or the focus rank's server's.
    void reset_rooms(std::span<const std::int64_t> step_bytes) {
        const double ratio = topo_.scale_up_gbps / topo_.scale_out_gbps;
        capacity_.assign(steps_, 0);
        for (std::size_t k = 1; k < steps_ && k < step_bytes.size(); ++k)
            capacity_[k] = saturate(static_cast<double>(step_bytes[k]) * ratio);
        if (timing_ != gather_timing::windowed) return;
        const std::size_t rooms =
            focus_ < 0 ? static_cast<std::size_t>(topo_.ranks()) : static_cast<std::size_t>(gpus_);
        room_send_.resize(rooms * steps_);
        room_recv_.resize(rooms * steps_);
        for (std::size_t k = 0; k < rooms; ++k) {
            std::copy(capacity_.begin(), capacity_.end(), room_send_.begin() + static_cast<std::ptrdiff_t>(k * steps_));
            std::copy(capacity_.begin(), capacity_.end(), room_recv_.begin() + static_cast<std::ptrdiff_t>(k * steps_));
        }
    }

    // Calls f.template operator()<M>() with the mode of this plan.
    template <class F>
    void with_mode(F&& f) {
        const bool focus = focus_ >= 0;
        if (timing_ == gather_timing::up_front) {
            if (focus)
                split_blocks_ ? f.template operator()<emit_mode{true, true, true}>()
                              : f.template operator()<emit_mode{true, true, false}>();
            else
                split_blocks_ ? f.template operator()<emit_mode{true, false, true}>()
                              : f.template operator()<emit_mode{true, false, false}>();
        } else {
            if (focus)
                split_blocks_ ? f.template operator()<emit_mode{false, true, true}>()
                              : f.template operator()<emit_mode{false, true, false}>();
            else
                split_blocks_ ? f.template operator()<emit_mode{false, false, true}>()
                              : f.template operator()<emit_mode{false, false, false}>();
        }
    }

    template <emit_mode M>
    void emit_intra_tile() {
        const auto ug = static_cast<std::size_t>(gpus_);
        const std::size_t stride = tile_stride();
        const std::int32_t first = 1;
        const std::int32_t last = std::max(1, last_step_);
        for (std::size_t a = 0; a < ug; ++a)
            for (std::size_t b = 0; b < ug; ++b) {
                const std::int64_t n = tile_[a * stride + b];
                if (n == 0) continue;
                const int src = rank(source_, a);
                const int dst = rank(destination_, b);
                const transfer_end from{src, buffer::send, no_region, send_at_[a * ug + b]};
                const transfer_end to{dst, buffer::recv, no_region, recv_at_[a * ug + b]};
                const block_key block{src, dst};
                if constexpr (M.up_front) emit_up<M, false>(1, from, to, block, n);
                else emit_up<M, true>(roomiest<false>(src, dst, first, last), from, to, block, n);
            }
    }

    [[nodiscard]] int rank(int server, std::size_t local) const noexcept {
        return server * gpus_ + static_cast<int>(local);
    }
    // Whether `rank`'s moves are placed (and regions kept): every rank, or the focus's server's.
    template <emit_mode M>
    [[nodiscard]] bool local(int rank) const noexcept {
        if constexpr (M.focus) return rank / gpus_ == focus_server_;
        else return true;
    }
    // Whether a transfer between src and dst is kept.
    template <emit_mode M>
    [[nodiscard]] bool kept(int src, int dst) const noexcept {
        if constexpr (M.focus) return src == focus_ || dst == focus_;
        else return true;
    }
    template <emit_mode M>
    [[nodiscard]] static bool foreign(std::uint32_t id) noexcept {
        if constexpr (M.focus) return id >= foreign_region;
        else return false;
    }

    // One end of a transfer: rank, buffer, region (no_region outside scratch), offset (relative
    // to the region in scratch).
    struct transfer_end {
        int rank;
        fast::buffer buffer;
        std::uint32_t region;
        std::int64_t offset;
    };

    using region = scratch_region;

    // A slot's last gather or redistribution: the next piece extends it when it moves to or from
    // the same GPU (`key`) at the offset where this one ended (`end`; the scratch end is
    // contiguous by construction).
    struct open_move {
        std::int32_t step = -1; // its step, or -1: none yet
        std::size_t key = 0;
        std::int64_t end = 0;
        std::size_t record = none; // its record in its step's bucket, if kept
        block_key block;           // the block of its last piece
    };

    // The stream being emitted: rail `rail` of the loaded tile, from its carrier (GPU `rail` of
    // the source server) to its receiver (the same GPU of the destination server).
    struct stream_ends {
        std::size_t rail = 0;
        int origins = 0; // rank of GPU 0 of the source server
        int finals = 0;  // rank of GPU 0 of the destination server
        int carrier = 0;
        int receiver = 0;
        bool gathers = false;        // the source server's moves are placed here
        bool scatters = false;       // the destination server's moves are placed here
        bool scale_out_kept = false; // the scale-out transfers are kept
    };

    // One slot of a stream while it is emitted: its regions (created on first use) and the
    // bytes staged in them so far, and its open transfers, which a contiguous piece extends: its
    // scale-out, and with windowed timing its last gather and last redistribution. While the
    // slot is emitted nothing else goes into their steps (gathers go before its step,
    // redistribution after it, and a carrier sends to one receiver per step), and its gather and
    // landing regions are its own. (Up front, every slot of a carrier gathers into one region:
    // gathers there extend whatever their step's last transfer is.)
    struct slot_state {
        std::int32_t step = 0;
        std::uint32_t gather_region = no_region;
        std::uint32_t landing_region = no_region;
        std::int64_t gathered = 0;
        std::int64_t landed = 0;
        std::size_t scale_out = none; // the slot's scale-out so far, if kept
        block_key scale_out_block;
        open_move gather;  // keyed by origin, ending in its send buffer
        open_move scatter; // keyed by final GPU, ending in its receive buffer
    };

    template <emit_mode M>
    void emit_stream(int rail, std::span<const piece> pieces, std::span<const stream_slot> slots) {
        const stream_ends ends = ends_of<M>(rail);
        const piece* pc = pieces.data();
        const piece* const end = pc + pieces.size();
        std::int64_t used = 0; // bytes of *pc already sent
        for (const stream_slot& slot : slots) {
            slot_state state = begin_slot<M>(ends, slot.step);
            for (std::int64_t left = slot.bytes; left > 0;) {
                FAST_ASSERT(pc != end, "a stream has as many bytes as its slots");
                const std::int64_t n = std::min(pc->bytes - used, left);
                emit_slice<M>(ends, *pc, pc->offset + used, n, state);
                used += n;
                left -= n;
                if (used == pc->bytes) {
                    ++pc;
                    used = 0;
                }
            }
            end_slot<M>(state);
        }
    }

    template <emit_mode M>
    [[nodiscard]] stream_ends ends_of(int rail) const noexcept {
        stream_ends e;
        e.rail = static_cast<std::size_t>(rail);
        e.origins = source_ * gpus_;
        e.finals = destination_ * gpus_;
        e.carrier = e.origins + rail;
        e.receiver = e.finals + rail;
        // The source server's gathers and the destination server's redistribution are placed
        // where their server's moves are.
        e.gathers = local<M>(e.carrier);
        e.scatters = local<M>(e.receiver);
        e.scale_out_kept = kept<M>(e.carrier, e.receiver);
        return e;
    }

    // A slot's state at its start. Up front, every slot of a carrier gathers into one region.
    template <emit_mode M>
    slot_state begin_slot(const stream_ends& e, std::int32_t step) {
        slot_state state;
        state.step = step;
        if constexpr (M.up_front) {
            std::uint32_t& staged = staged_region_[static_cast<std::size_t>(e.carrier)];
            if (staged == no_region) staged = new_region<M>(e.carrier, 0, step);
            state.gather_region = staged;
            if (!foreign<M>(staged)) {
                state.gathered = regions_[staged].size;
                regions_[staged].last = std::max(regions_[staged].last, step);
            }
        }
        // One placement decision per origin (gathers) and per final GPU (redistribution) of
        // the slot, remembered under this slot's stamp.
        ++stamp_;
        return state;
    }

    // The slot's regions end as large as what it staged in them.
    template <emit_mode M>
    void end_slot(const slot_state& state) {
        if (!foreign<M>(state.gather_region) && state.gather_region != no_region)
            regions_[state.gather_region].size = state.gathered;
        if (!foreign<M>(state.landing_region) && state.landing_region != no_region)
            regions_[state.landing_region].size = state.landed;
    }

    // `n` bytes of piece p from offset `at` of its block: a gather unless the carrier is the
    // origin, the scale-out transfer, a redistribution unless the receiver is the final GPU.
    template <emit_mode M>
    void emit_slice(const stream_ends& e, const piece& p, std::int64_t at, std::int64_t n, slot_state& state) {
        const auto block_at =
            static_cast<std::size_t>(p.origin) * static_cast<std::size_t>(gpus_) + static_cast<std::size_t>(p.final);
        block_key block;
        if constexpr (M.split) block = {e.origins + p.origin, e.finals + p.final};
        const transfer_end sent{e.carrier, buffer::send, no_region, send_at_[block_at] + at};
        const transfer_end from =
            static_cast<std::size_t>(p.origin) == e.rail ? sent : gather_slice<M>(e, p, sent, block, n, state);
        const transfer_end received{e.receiver, buffer::recv, no_region, recv_at_[block_at] + at};
        const transfer_end to =
            static_cast<std::size_t>(p.final) == e.rail ? received : land_slice<M>(e, p, received, block, n, state);
        if (e.scale_out_kept) send_slice<M>(from, to, block, n, state);
    }

    // A slice's gather from its origin's send buffer (`sent` at the origin's offset) into the
    // slot's gather region at the carrier, placed where the source server's moves are; returns
    // the scale-out's source end there.
    template <emit_mode M>
    transfer_end gather_slice(const stream_ends& e, const piece& p, const transfer_end& sent, const block_key& block,
                              std::int64_t n, slot_state& state) {
        const auto a = static_cast<std::size_t>(p.origin);
        if (e.gathers) {
            const int origin = e.origins + p.origin;
            if (gather_stamp_[a] != stamp_)
                state.gather_region = decide_gather<M>(a, origin, e.carrier, state.step, state.gather_region);
            emit_move<M>(state.gather, a, gather_step_of_[a], {origin, buffer::send, no_region, sent.offset},
                         {e.carrier, buffer::scratch, state.gather_region, state.gathered}, block, n);
        } else if (state.gather_region == no_region) {
            state.gather_region = next_foreign_++;
        }
        const transfer_end from{e.carrier, buffer::scratch, state.gather_region, state.gathered};
        state.gathered += n;
        return from;
    }

    // A slice's redistribution from the slot's landing region at the receiver into the final
    // GPU's receive buffer (`received` at its offset), placed where the destination server's
    // moves are; returns the scale-out's destination end there.
    template <emit_mode M>
    transfer_end land_slice(const stream_ends& e, const piece& p, const transfer_end& received, const block_key& block,
                            std::int64_t n, slot_state& state) {
        const auto b = static_cast<std::size_t>(p.final);
        if (e.scatters) {
            const int final_rank = e.finals + p.final;
            if (scatter_stamp_[b] != stamp_)
                state.landing_region = decide_scatter<M>(b, e.receiver, final_rank, state.step, state.landing_region);
            emit_move<M>(state.scatter, b, scatter_step_of_[b],
                         {e.receiver, buffer::scratch, state.landing_region, state.landed},
                         {final_rank, buffer::recv, no_region, received.offset}, block, n);
        } else if (state.landing_region == no_region) {
            state.landing_region = next_foreign_++;
        }
        const transfer_end to{e.receiver, buffer::scratch, state.landing_region, state.landed};
        state.landed += n;
        return to;
    }

    // The slice's scale-out transfer: it extends the slot's scale-out so far where contiguous.
    template <emit_mode M>
    void send_slice(const transfer_end& from, const transfer_end& to, const block_key& block, std::int64_t n,
                    slot_state& state) {
        const auto k = static_cast<std::size_t>(state.step);
        if (state.scale_out != none &&
            extends<M>(buckets_[k][state.scale_out], state.scale_out_block, from, to, block)) {
            buckets_[k][state.scale_out].transfer.bytes += n;
            if constexpr (M.split) last_block_[k] = block;
        } else {
            state.scale_out = append<M>(state.step, n, from, to, block, tier::scale_out);
        }
        if constexpr (M.split) state.scale_out_block = block;
    }

    // Whether a transfer from `from` to `to` continues record x (same regions, contiguous at
    // both ends, and with split blocks the same block as the last piece `last`).
    template <emit_mode M>
    [[nodiscard]] static bool extends(const record& x, const block_key& last, const transfer_end& from,
                                      const transfer_end& to, const block_key& block) noexcept {
        bool same_block = true;
        if constexpr (M.split) same_block = last == block;
        return x.transfer.src_buffer == from.buffer && x.transfer.dst_buffer == to.buffer &&
               x.src_region == from.region && x.dst_region == to.region &&
               x.transfer.src_offset + x.transfer.bytes == from.offset &&
               x.transfer.dst_offset + x.transfer.bytes == to.offset && same_block;
    }

    template <emit_mode M>
    std::uint32_t new_region(int rank, std::int32_t first, std::int32_t last) {
        if (!local<M>(rank)) return next_foreign_++;
        if (regions_.size() >= foreign_region) throw invalid_argument("a plan with more than 2^31 scratch regions");
        regions_.push_back({0, 0, rank, first, last});
        return static_cast<std::uint32_t>(regions_.size() - 1);
    }

    // Resolves one end of a kept transfer in the focus rank's program: its own scratch offsets
    // get their region's base, another rank's offsets read 0 (each side posts its own buffer).
    void resolve_focus(int end_rank, buffer in, std::uint32_t region_id, std::int64_t& offset) const noexcept {
        if (end_rank != focus_) offset = 0;
        else if (in == buffer::scratch) offset += regions_[region_id].base;
    }

    // Row of `rank`'s rooms: every rank's, or the focus server's GPUs'.
    [[nodiscard]] std::size_t room_row(int rank) const noexcept {
        return static_cast<std::size_t>(focus_ < 0 ? rank : rank - focus_server_ * gpus_) * steps_;
    }

    // The step in [first, last] with the most scale-up room left (under that step's scale-out)
    // for src's send and dst's receive port; ties go to the latest step when `late` (gathers:
    // less time in scratch), else the earliest.
    template <bool late>
    [[nodiscard]] std::int32_t roomiest(int src, int dst, std::int32_t first, std::int32_t last) const noexcept {
        const std::int64_t* send = room_send_.data() + room_row(src);
        const std::int64_t* recv = room_recv_.data() + room_row(dst);
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
    template <emit_mode M>
    [[nodiscard]] __attribute__((noinline)) std::uint32_t decide_gather(std::size_t a, int origin, int carrier,
                                                                        std::int32_t slot_step, std::uint32_t region) {
        gather_stamp_[a] = stamp_;
        std::int32_t step = 0;
        if constexpr (!M.up_front)
            step = roomiest<true>(origin, carrier, std::max(0, slot_step - window_), slot_step - 1);
        gather_step_of_[a] = step;
        if (region == no_region) region = new_region<M>(carrier, step, slot_step);
        regions_[region].first = std::min(regions_[region].first, step);
        return region;
    }

    // Likewise the step of the redistribution to final GPU `b` (one of the `window` steps after).
    template <emit_mode M>
    [[nodiscard]] __attribute__((noinline)) std::uint32_t decide_scatter(std::size_t b, int receiver, int final_rank,
                                                                         std::int32_t slot_step, std::uint32_t region) {
        scatter_stamp_[b] = stamp_;
        std::int32_t step = slot_step + 1;
        if constexpr (!M.up_front)
            step = roomiest<false>(receiver, final_rank, slot_step + 1, std::min(slot_step + window_, last_step_ + 1));
        scatter_step_of_[b] = step;
        if (region == no_region) region = new_region<M>(receiver, slot_step, step);
        regions_[region].last = std::max(regions_[region].last, step);
        return region;
    }

    // A gather or redistribution of a stream's piece (see emit_stream's open transfers); the
    // offset `tracked` (at the key's end) is the one in the end outside scratch.
    template <emit_mode M>
    void emit_move(open_move& open, std::size_t key, std::int32_t step, const transfer_end& from,
                   const transfer_end& to, const block_key& block, std::int64_t n) {
        if constexpr (M.up_front) {
            emit_up<M, false>(step, from, to, block, n);
        } else {
            count_up(step, from.rank, to.rank, n);
            const std::int64_t tracked = from.buffer == buffer::scratch ? to.offset : from.offset;
            bool same_block = true;
            if constexpr (M.split) same_block = open.block == block;
            if (open.step == step && open.key == key && open.end == tracked && same_block) {
                if (open.record != none) {
                    buckets_[static_cast<std::size_t>(step)][open.record].transfer.bytes += n;
                    if constexpr (M.split) last_block_[static_cast<std::size_t>(step)] = block;
                }
            } else {
                open.record = append<M>(step, n, from, to, block, tier::scale_up);
            }
            open.step = step;
            open.key = key;
            open.end = tracked + n;
            if constexpr (M.split) open.block = block;
        }
    }

    // Takes scale-up bytes off src's send and dst's receive room in step `step`.
    void count_up(std::int32_t step, int src, int dst, std::int64_t bytes) noexcept {
        room_send_[room_row(src) + static_cast<std::size_t>(step)] -= bytes;
        room_recv_[room_row(dst) + static_cast<std::size_t>(step)] -= bytes;
    }

    // A scale-up transfer into step `step`: extends the last transfer the step has seen when
    // that is kept, between the same ranks and contiguous with it, and (with `load`: windowed
    // timing) counts its bytes against both ports.
    template <emit_mode M, bool load>
    void emit_up(std::int32_t step, const transfer_end& from, const transfer_end& to, const block_key& block,
                 std::int64_t bytes) {
        if constexpr (load) count_up(step, from.rank, to.rank, bytes);
        if (const std::size_t last = last_kept<M>(step); last != none) {
            record& x = buckets_[static_cast<std::size_t>(step)][last];
            block_key last_block;
            if constexpr (M.split) last_block = last_block_[static_cast<std::size_t>(step)];
            if (x.transfer.src == from.rank && x.transfer.dst == to.rank && x.transfer.tier == tier::scale_up &&
                extends<M>(x, last_block, from, to, block)) {
                x.transfer.bytes += bytes;
                if constexpr (M.split) last_block_[static_cast<std::size_t>(step)] = block;
                return;
            }
        }
        append<M>(step, bytes, from, to, block, tier::scale_up);
    }

    // The last transfer step `step` has seen, if kept (whole plans keep every one), or none.
    template <emit_mode M>
    [[nodiscard]] std::size_t last_kept(std::int32_t step) const noexcept {
        const auto k = static_cast<std::size_t>(step);
        if constexpr (M.focus) return last_kept_[k];
        else return buckets_[k].empty() ? none : buckets_[k].size() - 1;
    }

    // Adds a transfer to step `step` as its last, if kept (else the step's last transfer is
    // not one of the kept ones any more). Returns its index in the step, or none.
    template <emit_mode M>
    std::size_t append(std::int32_t step, std::int64_t bytes, const transfer_end& from, const transfer_end& to,
                       const block_key& block, fast::tier t) {
        const auto k = static_cast<std::size_t>(step);
        if (!kept<M>(from.rank, to.rank)) return last_kept_[k] = none;
        std::vector<record>& b = buckets_[k];
        b.push_back(record{fast::transfer{bytes, from.offset, to.offset, from.rank, to.rank, t, from.buffer, to.buffer},
                           from.region, to.region});
        if constexpr (M.focus) last_kept_[k] = b.size() - 1;
        if constexpr (M.split) last_block_[k] = block;
        return b.size() - 1;
    }

    topology topo_;
    int gpus_ = 1;
    int source_ = 0;
    int destination_ = 0;
    gather_timing timing_ = gather_timing::windowed;
    int window_ = 1;
    std::int32_t last_step_ = 0;
    int focus_ = -1;
    int focus_server_ = -1;
    bool split_blocks_ = false;
    std::vector<std::int64_t> tile_; // the loaded tile, G x G
    std::vector<std::int64_t> send_at_;
    std::vector<std::int64_t> recv_at_;
    std::vector<std::int64_t> heat_;            // per rank: what it receives in all
    std::vector<std::uint32_t> heat_rank_;      // per rank: its position by heat within its server
    std::vector<std::int32_t> gather_step_of_;  // per origin GPU, within one slot
    std::vector<std::int32_t> scatter_step_of_; // per final GPU, within one slot
    std::vector<std::uint64_t> gather_stamp_;   // per origin GPU: the slot whose step it holds
    std::vector<std::uint64_t> scatter_stamp_;  // per final GPU: likewise
    std::uint64_t stamp_ = 0;                   // the slot being emitted
    std::vector<std::vector<record>> buckets_;  // per step, in emission order
    std::vector<std::size_t> last_kept_;        // per step: its last transfer if kept, else none
    std::vector<block_key> last_block_;         // split blocks: per step, the block of its last transfer's last bytes
    std::size_t steps_ = 0;
    std::vector<std::int64_t> capacity_; // per step: scale-up bytes that fit under its scale-out
    // rank x step: room left on its send (receive) port, the step's capacity less the scale-up
    // bytes placed there (kept as room, so that a step's choice is one minimum per step).
    std::vector<std::int64_t> room_send_;
    std::vector<std::int64_t> room_recv_;
    std::vector<region> regions_;
    std::uint32_t next_foreign_ = foreign_region;
    std::vector<std::uint32_t> staged_region_; // per rank: its up-front region, or no_region
    scratch_layout scratch_;
};

} // namespace fast::detail
