#pragma once
// The UCX side of a communicator: one context, one worker, one endpoint per peer (peer error
// handling), tagged sends and receives whose completion lands in slots, flushes, cancellation.

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fast::exec::detail {

struct slot_block;

/// Completion record of one UCX request.
struct op_slot {
    void* request = nullptr; ///< outstanding request, or nullptr
    std::size_t length = 0;  ///< bytes received (receives)
    ucs_status_t status = UCS_OK;
    bool done = true;
    slot_block* block = nullptr;
    std::uint64_t done_ns = 0; ///< when a callback completed it (traced blocks only)
};

/// The slots of one operation, with the count of completions callbacks reported.
struct slot_block {
    std::vector<op_slot> slots;
    std::size_t completed = 0; ///< completions reported by callbacks
    bool trace = false;        ///< callbacks stamp their completion time (done_ns)
};

struct peer_state {
    ucp_ep_h ep = nullptr;
    ucs_status_t error = UCS_OK; ///< set by the endpoint's error callback
    int rank = -1;
    bool detects_failure = false;        ///< UCP_ERR_HANDLING_MODE_PEER (else found by timeouts)
    std::size_t* error_events = nullptr; ///< the worker's count of endpoint errors
};

class worker {
public:
    worker() = default;
    ~worker() { close(); }
    worker(const worker&) = delete;
    worker& operator=(const worker&) = delete;

    /// Creates the UCX context and worker; `memory_type` must be among UCX's memory types;
    /// `eager`: with host memory, every message size goes by UCX's eager protocol
    /// (RNDV_THRESH=inf; the credit flow control paces the senders instead); device memory
    /// keeps UCX's thresholds, so its large messages still go by rendezvous. CUDA memory on UCX
    /// before 1.16 gets UCX's new protocols unless UCX_PROTO_ENABLE is set (worker.cpp).
    /// Returns "" or what failed.
    /// `blocking`: the worker can sleep on UCX's event file descriptor (idle()) instead of
    /// yielding the processor.
    [[nodiscard]] std::string init(int rank, int size, ucs_memory_type_t memory_type, bool eager,
                                   bool blocking = false);
    [[nodiscard]] std::string address(std::vector<unsigned char>& out);
    /// Closes the endpoints (bounded), destroys the worker and the context; idempotent. Before
    /// the buffers that UCX may still write to (scratch) are released.
    void close() noexcept;
    /// An endpoint to every other rank; `addresses[r]` is rank r's worker address. Endpoints ask
    /// for peer error handling (UCP_ERR_HANDLING_MODE_PEER). UCX 1.13's shared-memory transports
    /// cannot handle peer failures, so UCX would route ranks on one host over the network instead
    /// (or find no transport at all with UCX_TLS=sm,self): endpoints to ranks with the same host
    /// key (`same_host[r]`) therefore use UCP_ERR_HANDLING_MODE_NONE, as do endpoints that UCX
    /// cannot create with peer error handling; a failure of such a peer is found by the timeout.
    /// No endpoint to the ranks with `cut_off[r]` (a NIC between them is down).
    [[nodiscard]] std::string connect(const std::vector<const unsigned char*>& addresses,
                                      const std::vector<char>& same_host, const std::vector<char>& cut_off);

    [[nodiscard]] unsigned progress() noexcept { return ucp_worker_progress(worker_); }
    /// After a progress() that did nothing: lets other work run until something may have
    /// happened. Polling workers yield the processor (sched_yield); blocking ones arm the worker
    /// and sleep on its event file descriptor until an event, `deadline`, or at most 10 ms
    /// (a bound against a missed wake-up).
    void idle(std::chrono::steady_clock::time_point deadline) noexcept;
    [[nodiscard]] bool blocking() const noexcept { return event_fd_ >= 0; }
    [[nodiscard]] peer_state& peer(int r) noexcept { return peers_[static_cast<std::size_t>(r)]; }
    [[nodiscard]] const peer_state& peer(int r) const noexcept { return peers_[static_cast<std::size_t>(r)]; }
    [[nodiscard]] ucs_memory_type_t memory_type() const noexcept { return memory_type_; }
    /// Whether every message goes eagerly (init's `eager` with host memory): no rendezvous, so
    /// no protocol reply of UCX outlives the request that caused it.
    [[nodiscard]] bool eager_only() const noexcept { return eager_only_; }
    /// How many endpoint errors were reported so far (to notice new ones cheaply).
    [[nodiscard]] std::size_t error_events() const noexcept { return error_events_; }

    /// Registers the scratch buffer [p, p + bytes) with UCX once (ucp_mem_map), replacing the
    /// previous registration: contiguous messages inside it then pass the handle
    /// (UCP_OP_ATTR_FIELD_MEMH) and skip UCX's per-message lookup in its registration cache.
    /// Only for CUDA memory on UCX 1.14 or later (1.13 takes a handle only with its original
    /// protocols, which CUDA memory does not use here); host and ROCm memory keep UCX's own
    /// path. A registration UCX refuses leaves messages without a handle. Call before releasing
    /// the previous scratch; close() unregisters.
    void map_scratch(void* p, std::size_t bytes) noexcept;

    /// Posting: UCS_OK (completed at once, slot done), UCS_INPROGRESS (slot completes later) or
    /// an error (slot done with it). `count` is bytes (contiguous) or iov entries. Buffers are of
    /// the communicator's memory type, or host memory with `host` (control messages).
    ucs_status_t send(int peer, const void* buffer, std::size_t count, bool iov, std::uint64_t tag, op_slot& slot,
                      bool host = false) noexcept;
    ucs_status_t recv(void* buffer, std::size_t count, bool iov, std::uint64_t tag, op_slot& slot,
                      bool host = false) noexcept;
    /// Whether a message whose tag matches `tag` under `mask` arrived and waits unmatched
    /// (ucp_tag_probe_nb; it stays queued); its tag and length go to `tag_out` and `length`.
    bool probe_unexpected(std::uint64_t tag, std::uint64_t mask, std::uint64_t& tag_out, std::size_t& length) noexcept;
    /// Flushes every endpoint of the worker.
    ucs_status_t flush_all(op_slot& slot) noexcept;
    /// Cancels an outstanding receive (its slot completes, usually with UCS_ERR_CANCELED).
    void cancel(op_slot& slot) noexcept;
    /// Releases the endpoint without waiting for the peer where it has peer error handling
    /// (its outstanding requests complete with UCS_ERR_CANCELED); else closes it by flushing,
    /// which a failed peer never completes (the caller bounds the wait). The peer is
    /// unreachable afterwards.
    ucs_status_t force_close(int peer, op_slot& slot) noexcept;
    /// Gives up on an outstanding request: UCX invokes no callback for it any more (it may still
    /// complete internally). For requests that cancellation could not complete in time.
    static void abandon(op_slot& slot) noexcept;
    /// After cancelling receives and force-closing endpoints: progresses until `block` has seen
    /// `expected` completions and every `closing` slot is done, for at most `limit`, then
    /// abandons what is left. (Over endpoints without peer error handling, UCX 1.13 cannot purge
    /// requests, and a failed peer never answers them.)
    void drain(slot_block& block, std::size_t expected, std::vector<op_slot>& closing,
               std::chrono::milliseconds limit) noexcept;

    // Aborts: a rank whose call fails tells every peer, so that they fail at once instead of
    // waiting for their own timeouts. Every worker keeps one receive posted for them.
    /// Posts the receive for abort messages (after the endpoints are up).
    [[nodiscard]] std::string arm_abort();
    /// Whether a peer's abort message arrived.
    [[nodiscard]] bool aborted() const noexcept {
        return abort_slot_.done && abort_slot_.status == UCS_OK && abort_armed_;
    }
    /// The abort's sender, error code (an errc value) and message.
    [[nodiscard]] int abort_sender() const noexcept;
    [[nodiscard]] int abort_code() const noexcept;
    [[nodiscard]] std::string abort_message() const;
    /// Sends an abort (code, message) to every peer that is still reachable, once per worker and
    /// never after receiving one; waits for the sends at most `wait`.
    void send_abort(int code, std::string_view message, std::chrono::milliseconds wait) noexcept;

    /// UCX's version, e.g. "1.13.1".
    [[nodiscard]] static const char* version() noexcept { return ucp_get_version_string(); }

private:
    static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status) noexcept;
    void unmap_scratch() noexcept;
    /// Adds the scratch handle to `param` where a contiguous message lies inside scratch.
    void attach_memh(ucp_request_param_t& param, const void* buffer, std::size_t count, bool iov,
                     bool host) const noexcept;

    ucp_context_h context_ = nullptr;
    ucp_worker_h worker_ = nullptr;
    ucs_memory_type_t memory_type_ = UCS_MEMORY_TYPE_HOST;
    bool eager_only_ = false;
    int rank_ = -1;
    std::vector<peer_state> peers_;
    std::vector<op_slot> closing_; ///< close()'s slots, one per peer, allocated by init()
    std::size_t error_events_ = 0;
    bool use_memh_ = false; ///< whether scratch is registered (map_scratch)
    int event_fd_ = -1;     ///< blocking progress: the worker's event file descriptor
    ucp_mem_h scratch_memh_ = nullptr;
    const char* scratch_base_ = nullptr;
    std::size_t scratch_bytes_ = 0;
    struct abort_message_t {
        std::int32_t sender;
        std::int32_t code;
        char text[504];
    };
    abort_message_t abort_in_{}, abort_out_{};
    op_slot abort_slot_;
    bool abort_armed_ = false;
    bool abort_sent_ = false;
};

/// "Connection reset by remote peer" and the like.
[[nodiscard]] inline std::string ucx_error(ucs_status_t s) {
    return ucs_status_string(s);
}

} // namespace fast::exec::detail
