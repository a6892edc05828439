#include "worker.hpp"

#include "program.hpp"
#include "trace.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace fast::exec::detail {

namespace {

void complete(op_slot& s, ucs_status_t status) noexcept {
    s.status = status;
    s.done = true;
    s.request = nullptr;
    if (s.block != nullptr) {
        ++s.block->completed;
        if (s.block->trace) s.done_ns = clock_ns();
    }
}

void on_send(void* request, ucs_status_t status, void* user) noexcept {
    complete(*static_cast<op_slot*>(user), status);
    ucp_request_free(request);
}

void on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) noexcept {
    auto& s = *static_cast<op_slot*>(user);
    if (info != nullptr && status == UCS_OK) s.length = info->length;
    complete(s, status);
    ucp_request_free(request);
}

// Records what a non-blocking call returned: done at once, in progress, or failed.
ucs_status_t track(ucs_status_ptr_t ret, op_slot& s) noexcept {
    if (ret == nullptr) {
        s.status = UCS_OK;
        s.done = true;
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(ret)) {
        s.status = UCS_PTR_STATUS(ret);
        s.done = true;
        return s.status;
    }
    if (!s.done) s.request = ret; // else the callback already ran (and released it)
    return UCS_INPROGRESS;
}

void prepare(op_slot& s) noexcept {
    s.request = nullptr;
    s.length = 0;
    s.status = UCS_INPROGRESS;
    s.done = false;
}

} // namespace

void worker::idle(std::chrono::steady_clock::time_point deadline) noexcept {
    if (event_fd_ < 0) {
        sched_yield(); // two cores, many ranks: let the peers run
        return;
    }
    // Arm first: UCS_ERR_BUSY means events arrived since the last progress (progress again).
    if (ucp_worker_arm(worker_) != UCS_OK) return;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd fd{event_fd_, POLLIN, 0};
    (void)poll(&fd, 1, static_cast<int>(std::clamp<long long>(left.count(), 0, 10)));
}

std::string worker::init(int rank, int size, ucs_memory_type_t memory_type, bool eager, bool blocking) {
    rank_ = rank;
    memory_type_ = memory_type;
    eager_only_ = eager && memory_type == UCS_MEMORY_TYPE_HOST;
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) return "ucp_config_read failed: " + ucx_error(s);
    // Eager data for host memory only: device memory sent eagerly goes through shared-memory
    // fragments of a few KiB, each packed with a synchronous device copy (docs/executor.md,
    // "Steps"); there credits pace the senders and the data keep UCX's rendezvous.
    if (eager && memory_type == UCS_MEMORY_TYPE_HOST &&
        (s = ucp_config_modify(config, "RNDV_THRESH", "inf")) != UCS_OK) {
        ucp_config_release(config);
        return "ucp_config_modify(RNDV_THRESH=inf) failed: " + ucx_error(s);
    }
    // CUDA memory: UCX before 1.16 defaults to its original protocols, whose rendezvous
    // pipeline through host fragments stalled transfers for good on a GPU (docs/executor.md,
    // "On a GPU"); its new protocols, the default from 1.16, did not. ROCm memory has run on
    // neither, so it keeps UCX's default. A user's UCX_PROTO_ENABLE still decides.
    unsigned major = 0, minor = 0, release = 0;
    ucp_get_version(&major, &minor, &release);
    if (memory_type == UCS_MEMORY_TYPE_CUDA && (major == 1 && minor < 16) &&
        std::getenv("UCX_PROTO_ENABLE") == nullptr && (s = ucp_config_modify(config, "PROTO_ENABLE", "y")) != UCS_OK) {
        ucp_config_release(config);
        return "ucp_config_modify(PROTO_ENABLE=y) failed: " + ucx_error(s);
    }
    use_memh_ = memory_type == UCS_MEMORY_TYPE_CUDA && (major > 1 || minor >= 14); // map_scratch
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                        UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_TAG | (blocking ? UCP_FEATURE_WAKEUP : 0);
    params.mt_workers_shared = 0;
    params.estimated_num_eps = static_cast<std::size_t>(size);
    params.name = "fast-executor";
    s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK) {
        context_ = nullptr;
        return "ucp_init failed: " + ucx_error(s);
    }
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    s = ucp_context_query(context_, &attr);
    if (s != UCS_OK) return "ucp_context_query failed: " + ucx_error(s);
    if ((attr.memory_types & UCS_BIT(memory_type)) == 0) {
        std::string have;
        for (int t = 0; t < UCS_MEMORY_TYPE_LAST; ++t)
            if (attr.memory_types & UCS_BIT(t)) {
                if (!have.empty()) have += ", ";
                have += ucs_memory_type_names[t];
            }
        return std::string("UCX ") + version() + " does not support " + ucs_memory_type_names[memory_type] +
               " memory (its memory types: " + have + "); device buffers need a UCX built with " +
               (memory_type == UCS_MEMORY_TYPE_ROCM ? "ROCm" : "CUDA") + " support";
    }
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    s = ucp_worker_create(context_, &wp, &worker_);
    if (s != UCS_OK) {
        worker_ = nullptr;
        return "ucp_worker_create failed: " + ucx_error(s);
    }
    event_fd_ = -1;
    if (blocking && (s = ucp_worker_get_efd(worker_, &event_fd_)) != UCS_OK) {
        event_fd_ = -1;
        return "ucp_worker_get_efd failed (blocking progress): " + ucx_error(s);
    }
    // close() is noexcept, so its slots are allocated here, before the peers it closes.
    closing_.assign(static_cast<std::size_t>(size), op_slot{});
    peers_.assign(static_cast<std::size_t>(size), peer_state{});
    for (int r = 0; r < size; ++r) {
        peers_[static_cast<std::size_t>(r)].rank = r;
        peers_[static_cast<std::size_t>(r)].error_events = &error_events_;
    }
    return {};
}

std::string worker::address(std::vector<unsigned char>& out) {
    ucp_address_t* a = nullptr;
    std::size_t n = 0;
    const ucs_status_t s = ucp_worker_get_address(worker_, &a, &n);
    if (s != UCS_OK) return "ucp_worker_get_address failed: " + ucx_error(s);
    const auto* bytes = reinterpret_cast<const unsigned char*>(a);
    out.assign(bytes, bytes + n);
    ucp_worker_release_address(worker_, a);
    return {};
}

void worker::on_peer_error(void* arg, ucp_ep_h, ucs_status_t status) noexcept {
    auto* p = static_cast<peer_state*>(arg);
    if (p->error == UCS_OK) p->error = status;
    ++*p->error_events;
}

std::string worker::connect(const std::vector<const unsigned char*>& addresses, const std::vector<char>& same_host,
                            const std::vector<char>& cut_off) {
    for (std::size_t r = 0; r < peers_.size(); ++r) {
        if (static_cast<int>(r) == rank_ || cut_off[r]) continue;
        ucp_ep_params_t ep{};
        ep.field_mask =
            UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep.address = reinterpret_cast<const ucp_address_t*>(addresses[r]);
        ep.err_handler.cb = &worker::on_peer_error;
        ep.err_handler.arg = &peers_[r];
        ucs_status_t s = UCS_ERR_UNREACHABLE;
        if (!same_host[r]) {
            ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
            s = ucp_ep_create(worker_, &ep, &peers_[r].ep);
            peers_[r].detects_failure = s == UCS_OK;
        }
        if (s == UCS_ERR_UNREACHABLE) {
            ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
            s = ucp_ep_create(worker_, &ep, &peers_[r].ep);
        }
        if (s != UCS_OK) {
            peers_[r].ep = nullptr;
            return "ucp_ep_create to rank " + std::to_string(r) + " failed: " + ucx_error(s);
        }
    }
    return {};
}

void worker::map_scratch(void* p, std::size_t bytes) noexcept {
    unmap_scratch();
    if (!use_memh_ || context_ == nullptr || p == nullptr || bytes == 0) return;
    ucp_mem_map_params_t mp{};
    mp.field_mask =
        UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.address = p;
    mp.length = bytes;
    mp.memory_type = memory_type_;
    if (ucp_mem_map(context_, &mp, &scratch_memh_) != UCS_OK) {
        scratch_memh_ = nullptr; // messages go without a handle, as before
        return;
    }
    scratch_base_ = static_cast<const char*>(p);
    scratch_bytes_ = bytes;
}

void worker::unmap_scratch() noexcept {
    if (scratch_memh_ != nullptr && context_ != nullptr) (void)ucp_mem_unmap(context_, scratch_memh_);
    scratch_memh_ = nullptr;
    scratch_base_ = nullptr;
    scratch_bytes_ = 0;
}

void worker::attach_memh(ucp_request_param_t& param, const void* buffer, std::size_t count, bool iov,
                         bool host) const noexcept {
    // Compared as integers: the buffer may lie outside scratch entirely.
    const auto at = reinterpret_cast<std::uintptr_t>(buffer), base = reinterpret_cast<std::uintptr_t>(scratch_base_);
    if (scratch_memh_ == nullptr || iov || host || at < base || count > scratch_bytes_ ||
        at - base > scratch_bytes_ - count)
        return;
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = scratch_memh_;
}

ucs_status_t worker::send(int peer, const void* buffer, std::size_t count, bool iov, std::uint64_t tag, op_slot& slot,
                          bool host) noexcept {
    prepare(slot);
    peer_state& p = peers_[static_cast<std::size_t>(peer)];
    if (p.ep == nullptr || p.error != UCS_OK) {
        slot.done = true;
        slot.status = p.error != UCS_OK ? p.error : UCS_ERR_NOT_CONNECTED;
        return slot.status;
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                         UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.cb.send = &on_send;
    param.user_data = &slot;
    param.datatype = iov ? ucp_dt_make_iov() : ucp_dt_make_contig(1);
    param.memory_type = host ? UCS_MEMORY_TYPE_HOST : memory_type_;
    attach_memh(param, buffer, count, iov, host);
    return track(ucp_tag_send_nbx(p.ep, buffer, count, tag, &param), slot);
}

ucs_status_t worker::recv(void* buffer, std::size_t count, bool iov, std::uint64_t tag, op_slot& slot,
                          bool host) noexcept {
    prepare(slot);
    // No immediate completion: UCX 1.13 leaves recv_info's length at 0 when a receive completes
    // inside ucp_tag_recv_nbx, and the length is checked; the callback always reports it.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                         UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = &on_recv;
    param.user_data = &slot;
    param.datatype = iov ? ucp_dt_make_iov() : ucp_dt_make_contig(1);
    param.memory_type = host ? UCS_MEMORY_TYPE_HOST : memory_type_;
    attach_memh(param, buffer, count, iov, host);
    return track(ucp_tag_recv_nbx(worker_, buffer, count, tag, ~std::uint64_t{0}, &param), slot);
}

bool worker::probe_unexpected(std::uint64_t tag, std::uint64_t mask, std::uint64_t& tag_out,
                              std::size_t& length) noexcept {
    ucp_tag_recv_info_t info{};
    if (ucp_tag_probe_nb(worker_, tag, mask, 0, &info) == nullptr) return false;
    tag_out = info.sender_tag;
    length = info.length;
    return true;
}

ucs_status_t worker::flush_all(op_slot& slot) noexcept {
    prepare(slot);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &on_send;
    param.user_data = &slot;
    return track(ucp_worker_flush_nbx(worker_, &param), slot);
}

void worker::drain(slot_block& block, std::size_t expected, std::vector<op_slot>& closing,
                   std::chrono::milliseconds limit) noexcept {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    auto drained = [&] {
        if (block.completed < expected) return false;
        for (const op_slot& s : closing)
            if (!s.done) return false;
        return true;
    };
    while (!drained() && std::chrono::steady_clock::now() < deadline)
        if (progress() == 0) sched_yield();
    for (op_slot& s : block.slots) abandon(s);
    for (op_slot& s : closing) abandon(s);
}

void worker::cancel(op_slot& slot) noexcept {
    if (!slot.done && slot.request != nullptr) ucp_request_cancel(worker_, slot.request);
}

ucs_status_t worker::force_close(int peer, op_slot& slot) noexcept {
    peer_state& p = peers_[static_cast<std::size_t>(peer)];
    if (p.ep == nullptr) return UCS_OK; // never connected, or closed already: `slot` may track that close
    prepare(slot);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    // UCX allows FORCE only with peer error handling on both sides (ucp.h): other endpoints
    // close by flushing, which the caller's drain bounds.
    param.flags = p.detects_failure ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    param.cb.send = &on_send;
    param.user_data = &slot;
    const ucp_ep_h ep = p.ep;
    p.ep = nullptr;
    if (p.error == UCS_OK) p.error = UCS_ERR_CANCELED;
    return track(ucp_ep_close_nbx(ep, &param), slot);
}

void worker::abandon(op_slot& slot) noexcept {
    if (!slot.done && slot.request != nullptr) {
        ucp_request_free(slot.request); // no callback will be invoked for it any more
        slot.request = nullptr;
        slot.done = true;
        slot.status = UCS_ERR_CANCELED;
    }
}

std::string worker::arm_abort() {
    prepare(abort_slot_);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = &on_recv;
    param.user_data = &abort_slot_;
    param.datatype = ucp_dt_make_contig(1);
    // Any sender, any sequence number: match the control bit and the kind only.
    const std::uint64_t tag = tag_control | (static_cast<std::uint64_t>(control::abort) << 56);
    const ucs_status_t s =
        track(ucp_tag_recv_nbx(worker_, &abort_in_, sizeof abort_in_, tag, 0xff00000000000000ull, &param), abort_slot_);
    if (s != UCS_INPROGRESS && s != UCS_OK) return "posting the abort receive failed: " + ucx_error(s);
    abort_armed_ = true;
    return {};
}

int worker::abort_sender() const noexcept {
    return abort_in_.sender;
}
int worker::abort_code() const noexcept {
    return abort_in_.code;
}

std::string worker::abort_message() const {
    return std::string(abort_in_.text, strnlen(abort_in_.text, sizeof abort_in_.text));
}

// A string_view, so that noexcept callers passing a C string allocate nothing.
void worker::send_abort(int code, std::string_view message, std::chrono::milliseconds wait) noexcept {
    if (worker_ == nullptr || abort_sent_ || aborted()) return;
    abort_sent_ = true;
    abort_out_.sender = rank_;
    abort_out_.code = code;
    const std::size_t n = std::min(message.size(), sizeof abort_out_.text - 1);
    std::memcpy(abort_out_.text, message.data(), n);
    abort_out_.text[n] = '\0';
    std::vector<op_slot> slots;
    try {
        slots.resize(peers_.size());
    } catch (...) {
        return;
    }
    for (std::size_t r = 0; r < peers_.size(); ++r) {
        if (static_cast<int>(r) == rank_ || peers_[r].ep == nullptr || peers_[r].error != UCS_OK) continue;
        (void)send(static_cast<int>(r), &abort_out_, sizeof abort_out_, false,
                   make_control_tag(control::abort, 0, rank_), slots[r]);
    }
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
        bool all = true;
        for (const op_slot& s : slots) all = all && s.done;
        if (all || std::chrono::steady_clock::now() > deadline) break;
        if (ucp_worker_progress(worker_) == 0) sched_yield();
    }
    for (op_slot& s : slots) abandon(s);
}

void worker::close() noexcept {
    if (worker_ != nullptr) {
        if (abort_armed_ && !abort_slot_.done) {
            ucp_request_cancel(worker_, abort_slot_.request);
            abandon(abort_slot_);
        }
        // Close every endpoint: gracefully where the peer is healthy (nothing is in flight
        // after a completed call, so this does not wait for the peer), by force where it failed
        // and the endpoint has peer error handling (see force_close). Bounded: whatever has not
        // closed after a second is left to ucp_worker_destroy.
        std::vector<op_slot>& closing = closing_;
        closing.assign(closing.size(), op_slot{});
        for (std::size_t r = 0; r < peers_.size(); ++r) {
            peer_state& p = peers_[r];
            if (p.ep == nullptr) continue;
            ucp_request_param_t param{};
            param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
            param.flags = p.error != UCS_OK && p.detects_failure ? UCP_EP_CLOSE_FLAG_FORCE : 0;
            param.cb.send = &on_send;
            param.user_data = &closing[r];
            prepare(closing[r]);
            track(ucp_ep_close_nbx(p.ep, &param), closing[r]);
            p.ep = nullptr;
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        for (;;) {
            bool all = true;
            for (const op_slot& s : closing) all = all && s.done;
            if (all) break;
            const bool idle = ucp_worker_progress(worker_) == 0;
            if (std::chrono::steady_clock::now() > deadline) { // every round: progress may never run dry
                // Leave them to ucp_worker_destroy; no callback may write to `closing` now.
                for (op_slot& s : closing) abandon(s);
                break;
            }
            if (idle) sched_yield();
        }
        ucp_worker_destroy(worker_);
        worker_ = nullptr;
    }
    unmap_scratch(); // no request refers to scratch any more
    if (context_ != nullptr) ucp_cleanup(context_);
    context_ = nullptr;
}

} // namespace fast::exec::detail
