// The call path of alltoallv and alltoallv_init: the arguments checked, the counts agreed, this
// rank's plan made from them (or the last plan reused), scratch grown, this rank's program
// compiled, and (for alltoallv) carried out.

#include "communicator_impl.hpp"

#include <algorithm>
#include <limits>
#include <new>

#include <fast/error.hpp>

namespace fast::exec::detail {

std::string communicator_impl::validate(const call_args& a) const {
    const auto ur = static_cast<std::size_t>(size_);
    auto wrong_size = [&](const char* name, std::size_t n) {
        return std::string(name) + " has " + std::to_string(n) + " entries, expected " + std::to_string(ur) +
               " (one per rank)";
    };
    if (a.sendcounts.size() != ur) return wrong_size("sendcounts", a.sendcounts.size());
    if (a.sdispls.size() != ur) return wrong_size("sdispls", a.sdispls.size());
    if (a.recvcounts.size() != ur) return wrong_size("recvcounts", a.recvcounts.size());
    if (a.rdispls.size() != ur) return wrong_size("rdispls", a.rdispls.size());
    constexpr auto max_bytes = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
    struct interval {
        std::uintptr_t begin, end;
        std::size_t rank;
    };
    std::vector<interval> recv_blocks, send_blocks;
    for (int side = 0; side < 2; ++side) {
        const auto counts = side == 0 ? a.sendcounts : a.recvcounts;
        const auto displs = side == 0 ? a.sdispls : a.rdispls;
        const char* cname = side == 0 ? "sendcounts" : "recvcounts";
        const char* dname = side == 0 ? "sdispls" : "rdispls";
        const auto base = reinterpret_cast<std::uintptr_t>(side == 0 ? a.send : a.recv);
        std::size_t total = 0;
        for (std::size_t j = 0; j < ur; ++j) {
            const std::size_t c = counts[j];
            if (c == 0) continue;
            if (c > max_bytes)
                return std::string(cname) + "[" + std::to_string(j) + "] = " + std::to_string(c) + " is too large";
            if (displs[j] > max_bytes - c)
                return std::string(dname) + "[" + std::to_string(j) + "] + " + cname + "[" + std::to_string(j) +
                       "] = " + std::to_string(displs[j]) + " + " + std::to_string(c) + " is too large";
            if (total > max_bytes - c) return std::string("the ") + cname + " add up to more than 2^63 bytes";
            total += c;
            if (base == 0)
                return std::string(side == 0 ? "send" : "recv") + " is null but " + cname + "[" + std::to_string(j) +
                       "] = " + std::to_string(c);
            if (base > std::numeric_limits<std::uintptr_t>::max() - displs[j] - c)
                return std::string(dname) + "[" + std::to_string(j) + "] points past the end of the address space";
            (side == 0 ? send_blocks : recv_blocks).push_back({base + displs[j], base + displs[j] + c, j});
        }
    }
    auto by_begin = [](const interval& x, const interval& y) { return x.begin < y.begin; };
    std::sort(recv_blocks.begin(), recv_blocks.end(), by_begin);
    for (std::size_t k = 1; k < recv_blocks.size(); ++k)
        if (recv_blocks[k].begin < recv_blocks[k - 1].end)
            return "the receive blocks from rank " + std::to_string(recv_blocks[k - 1].rank) + " and rank " +
                   std::to_string(recv_blocks[k].rank) + " overlap";
    for (const interval& s : send_blocks) {
        // Receive blocks are disjoint: only the last one starting before s ends can overlap s.
        auto hit = std::lower_bound(recv_blocks.begin(), recv_blocks.end(), interval{s.end, 0, 0}, by_begin);
        if (hit != recv_blocks.begin() && std::prev(hit)->end > s.begin)
            return "the send block for rank " + std::to_string(s.rank) + " overlaps the receive block from rank " +
                   std::to_string(std::prev(hit)->rank) + " (in-place alltoallv is not supported)";
    }
    return {};
}

// The count agreement (count_agreement.hpp), round by round over the control exchange. Its
// errors are alike on every rank, but for a garbled message, which only this rank saw: then the
// communicator fails and the peers are told.
status communicator_impl::agree(call_kind kind, std::uint64_t seq, const call_args& a, std::string_view local_error) {
    count_agreement& c = *counts_;
    c.start(kind, seq, a, local_error);
    for (int n = 0; n < c.rounds(); ++n) {
        if (status s = exchange(c.round(n)); !s.ok()) return s;
        if (status s = c.received(n); !s.ok()) {
            if (s.code() == errc::internal) mark_failed(s);
            return s;
        }
    }
    return {};
}

// This rank's plan from the agreed counts, or the last call's where the counts (and whether
// blocks are split) are the same: the plan depends on nothing else.
status communicator_impl::plan_counts() {
    const bool split = single_segments() && !counts_->all_contiguous();
    const fast::shared_counts& shared = counts_->shared();
    const fast::server_counts& own = counts_->own();
    if (have_plan_ && split == plan_split_ && shared == plan_shared_ && own == plan_own_) {
        ++stats_.plans_reused;
        return {};
    }
    have_plan_ = false;
    have_program_ = false;
    try {
        rank_plan_ = &(split ? *split_planner_ : *planner_).make_rank(shared, own, rank_);
    } catch (const fast::invalid_argument& e) {
        return planning_error(e.what());
    }
    plan_split_ = split;
    plan_shared_ = shared; // same sizes every call: no allocation once warm
    plan_own_ = own;
    have_plan_ = true;
    ++stats_.plans_made;
    stats_.last_plan_steps = rank_plan_->steps;
    return {};
}

// Grows this rank's scratch where its program needs more (by at least half, to settle after a
// few calls; else exactly). A rank that cannot allocate tells its peers, which then fail instead
// of waiting for it.
status communicator_impl::ensure_scratch() {
    const auto need = static_cast<std::uint64_t>(rank_plan_->scratch_bytes);
    if (need <= scratch_capacity_) return {};
    const std::uint64_t grown = scratch_capacity_ + scratch_capacity_ / 2;
    std::string error;
    void* p = nullptr;
    std::uint64_t size = need;
    if (grown > need) {
        size = grown;
        p = memory_->allocate(static_cast<std::size_t>(grown), error);
    }
    if (p == nullptr) {
        size = need;
        p = need > std::numeric_limits<std::size_t>::max() ? nullptr
                                                           : memory_->allocate(static_cast<std::size_t>(need), error);
    }
    if (p == nullptr) {
        const status failure(errc::out_of_memory, "rank " + std::to_string(rank_) + ": cannot allocate the plan's " +
                                                      std::to_string(need) + " bytes of scratch: " + error);
        mark_failed(failure);
        return failure;
    }
    worker_.map_scratch(p, static_cast<std::size_t>(size)); // unregisters the old scratch first
    if (scratch_ != nullptr) memory_->release(scratch_);
    scratch_ = p;
    scratch_capacity_ = size;
    stats_.scratch_bytes = scratch_capacity_;
    return {};
}

status communicator_impl::prepare(call_kind kind, const call_args& a, std::uint64_t& seq) {
    try {
        return prepare_steps(kind, a, seq);
    } catch (...) {
        return fail_thrown();
    }
}

status communicator_impl::prepare_steps(call_kind kind, const call_args& a, std::uint64_t& seq) {
    seq = next_seq();
    std::string local;
    try {
        local = validate(a);
    } catch (...) {
        local = "out of host memory checking the arguments";
    }
    if (status s = agree(kind, seq, a, local); !s.ok()) return s;
    if (trace_.on()) trace_.call(trace_.current()).agreed_ns = clock_ns();
    if (status s = plan_counts(); !s.ok()) return s;
    if (status s = ensure_scratch(); !s.ok()) return s;
    if (trace_.on()) trace_.call(trace_.current()).planned_ns = clock_ns();
    // This rank's program; reused while the plan and the counts and displacements stay the same.
    auto same = [](std::span<const std::size_t> a, const std::vector<std::size_t>& b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end());
    };
    if (!have_program_ || !same(a.sendcounts, program_sendcounts_) || !same(a.sdispls, program_sdispls_) ||
        !same(a.recvcounts, program_recvcounts_) || !same(a.rdispls, program_rdispls_)) {
        have_program_ = false;
        program_sendcounts_.assign(a.sendcounts.begin(), a.sendcounts.end());
        program_sdispls_.assign(a.sdispls.begin(), a.sdispls.end());
        program_recvcounts_.assign(a.recvcounts.begin(), a.recvcounts.end());
        program_rdispls_.assign(a.rdispls.begin(), a.rdispls.end());
        send_layout_.assign(program_sendcounts_, program_sdispls_);
        recv_layout_.assign(program_recvcounts_, program_rdispls_);
        const std::string e = compile_program(*rank_plan_, send_layout_, recv_layout_, single_segments(), program_);
        if (!e.empty()) {
            // The peers compiled theirs and go on to the steps: tell them.
            const status failure(errc::internal, "rank " + std::to_string(rank_) + ": " + e);
            mark_failed(failure);
            return failure;
        }
        have_program_ = true;
    }
    if (trace_.on()) trace_.call(trace_.current()).compiled_ns = clock_ns();
    return {};
}

namespace {

// Clears the busy flag however a call leaves (an exception included).
struct busy_scope {
    bool& busy;
    explicit busy_scope(bool& b) noexcept : busy(b) { busy = true; }
    ~busy_scope() { busy = false; }
    busy_scope(const busy_scope&) = delete;
    busy_scope& operator=(const busy_scope&) = delete;
};

} // namespace

status communicator_impl::alltoallv(const call_args& a) {
    if (status s = check_usable("alltoallv"); !s.ok()) return s;
    const busy_scope busy(busy_);
    std::uint64_t seq = 0;
    const std::uint64_t plans_before = stats_.plans_made;
    try {
        if (trace_.on()) trace_.begin_call(seq_, false, a.sendcounts);
    } catch (...) {
        trace_.open({}); // out of memory: no trace rather than a failed call
    }
    operation_->set_tracer(&trace_);
    status s = prepare(call_kind::alltoallv, a, seq);
    if (s.ok()) {
        s = operation_->start(program_, {a.send, a.recv, scratch_}, seq); // ends with a flush
        if (s.ok()) s = operation_->wait();
        if (operation_->broke_communicator()) mark_failed(s);
    } else if (failed_.ok()) {
        if (status f = flush(); !f.ok()) s = f; // the exchanges' messages must be out too
    }
    ++(s.ok() ? stats_.operations : stats_.failures);
    trace_call_end(s, stats_.plans_made != plans_before);
    return s;
}

status communicator_impl::init(const call_args& a, program& out) {
    if (status s = check_usable("alltoallv_init"); !s.ok()) return s;
    const busy_scope busy(busy_);
    std::uint64_t seq = 0;
    const std::uint64_t plans_before = stats_.plans_made;
    try {
        if (trace_.on()) trace_.begin_call(seq_, false, a.sendcounts, true);
    } catch (...) {
        trace_.open({});
    }
    status s = prepare(call_kind::alltoallv_init, a, seq);
    trace_call_end(s, stats_.plans_made != plans_before);
    if (failed_.ok())
        if (status f = flush(); !f.ok()) s = f;
    if (s.ok()) {
        try {
            out = program_;
        } catch (...) {
            s = fail_thrown(); // the peers have their requests, this rank has none
        }
    }
    if (!s.ok()) ++stats_.failures;
    return s;
}

} // namespace fast::exec::detail
