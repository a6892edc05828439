#pragma once
// The state behind fast::exec::communicator and fast::exec::alltoallv_request. Its members are
// defined by concern: communicator_setup.cpp (creation), communicator_exchange.cpp (control
// messages), communicator_call.cpp (the call path), communicator_trace.cpp (traces),
// communicator_teardown.cpp (failure and destruction), persistent_request.cpp (request_impl).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fast/exec/communicator.hpp>
#include <fast/planner.hpp>
#include <fast/rank_program.hpp>

#include "call_args.hpp"
#include "control_routes.hpp"
#include "count_agreement.hpp"
#include "engine.hpp"
#include "exchange_round.hpp"
#include "fabric_environment.hpp"
#include "memory.hpp"
#include "program.hpp"
#include "trace.hpp"
#include "worker.hpp"

namespace fast::exec::detail {

class communicator_impl {
public:
    communicator_impl() = default;
    ~communicator_impl();
    communicator_impl(const communicator_impl&) = delete;
    communicator_impl& operator=(const communicator_impl&) = delete;

    status create(const bootstrap& boot, const config& cfg);
    status alltoallv(const call_args& a);
    /// The collective part of alltoallv_init: agreement, plan, scratch; `out` gets the program.
    status init(const call_args& a, program& out);

    [[nodiscard]] int rank() const noexcept { return rank_; }
    [[nodiscard]] int size() const noexcept { return size_; }
    [[nodiscard]] int servers() const noexcept { return topo_.servers; }
    [[nodiscard]] int gpus_per_server() const noexcept { return topo_.gpus_per_server; }
    /// The count agreement every call runs (gather or servers).
    [[nodiscard]] exec::agreement agreement() const noexcept;
    [[nodiscard]] const statistics& stats() const noexcept { return stats_; }
    [[nodiscard]] statistics& stats() noexcept { return stats_; }

    // For persistent requests.
    /// busy, or failed earlier: the status to return instead of starting; ok otherwise.
    [[nodiscard]] status check_usable(const char* what) const;
    std::uint64_t next_seq() noexcept { return seq_++; }
    void set_busy(bool b) noexcept { busy_ = b; }
    void mark_failed(const status& s) noexcept;
    [[nodiscard]] worker& transport() noexcept { return worker_; }
    [[nodiscard]] memory_backend& memory() noexcept { return *memory_; }
    [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return cfg_.timeout; }
    [[nodiscard]] bool credits() const noexcept { return cfg_.flow == exec::flow_control::credits; }
    /// Messages must be one contiguous range each in the user's buffers (no iov): the plans
    /// split blocks, unless every rank's layout is contiguous (then any packed range is one).
    [[nodiscard]] bool single_segments() const noexcept { return !cfg_.iov || cfg_.memory != exec::memory::host; }
    [[nodiscard]] void* scratch() const noexcept { return scratch_; }
    [[nodiscard]] tracer& trace() noexcept { return trace_; }
    [[nodiscard]] std::uint64_t scratch_capacity() const noexcept { return scratch_capacity_; }

private:
    status prepare(call_kind kind, const call_args& a, std::uint64_t& seq);
    status prepare_steps(call_kind kind, const call_args& a, std::uint64_t& seq);
    status fail_thrown() noexcept;
    void open_trace();
    void write_trace() noexcept;
    void trace_call_end(const status& s, bool planned) noexcept;
    status agree(call_kind kind, std::uint64_t seq, const call_args& a, std::string_view local_error);
    status plan_counts();
    status ensure_scratch();
    // Creation, round by round.
    status set_up(std::vector<unsigned char>& address);
    status agree_on_configuration(const status& local, std::size_t address_bytes, std::vector<std::string>& hosts,
                                  std::uint64_t& longest);
    status connect(const std::vector<unsigned char>& addresses, std::uint64_t stride,
                   const std::vector<std::string>& hosts);
    status report_connection(const status& connected);
    status make_planners();
    status handshake();

    /// An exchange() in progress: how many posted messages complete later, and the first error.
    struct exchange_state {
        std::size_t expected = 0;
        errc code = errc::transport;
        std::string error; ///< empty while all is well
    };
    status exchange(const exchange_round& r);
    void post_exchange(const exchange_round& r, exchange_state& x);
    void wait_exchange(const exchange_round& r, exchange_state& x);
    void check_exchange(const exchange_round& r, exchange_state& x);
    void send_control(int hop, const unsigned char* message, std::size_t bytes, std::uint64_t tag, op_slot& s,
                      exchange_state& x);
    void forward_relays(const exchange_round& r, exchange_state& x);
    [[nodiscard]] int failed_member(const rank_group& g) const;
    [[nodiscard]] std::string silent_ranks(const rank_group& g) const;
    void cancel_exchange(const rank_group& g, std::size_t expected) noexcept;
    status flush();
    status gather(const void* send, std::size_t bytes, std::vector<unsigned char>& out);
    [[nodiscard]] std::string validate(const call_args& a) const;

    int rank_ = -1;
    int size_ = 0;
    config cfg_;
    fabric_shape fabric_shape_; ///< FAST_FABRIC's servers and GPUs, which the ranks must form
    bootstrap boot_;
    fast::topology topo_;
    worker worker_;
    std::unique_ptr<memory_backend> memory_;
    std::unique_ptr<fast::planner> planner_;
    std::unique_ptr<fast::planner> split_planner_; ///< with split blocks (single-segment messages)
    std::unique_ptr<operation> operation_;         ///< runs this communicator's blocking calls

    // This rank's part of the plan of the last counts (cache), and whether it splits blocks.
    bool have_plan_ = false;
    bool plan_split_ = false;
    fast::shared_counts plan_shared_;
    fast::server_counts plan_own_;
    const fast::rank_program* rank_plan_ = nullptr;
    // Its compiled program, the counts and displacements it was compiled for.
    bool have_program_ = false;
    program program_;
    std::vector<std::size_t> program_sendcounts_, program_sdispls_, program_recvcounts_, program_rdispls_;
    buffer_layout send_layout_, recv_layout_;

    // This rank's scratch allocation.
    void* scratch_ = nullptr;
    std::uint64_t scratch_capacity_ = 0;

    std::uint64_t seq_ = 0;
    bool busy_ = false;
    status failed_; ///< not ok once unusable
    statistics stats_;
    tracer trace_;                            ///< config.trace / FAST_TRACE
    std::unique_ptr<count_agreement> counts_; ///< every call's count agreement
    slot_block exchange_slots_;
    std::vector<op_slot> exchange_closing_; ///< exchange()'s endpoint-close slots, kept between calls
    control_routes routes_;                 ///< control messages around NICs that are down
    /// A control message this rank carries as a stand-in in the current round.
    struct relay {
        int from = 0, to = 0, next = 0;
        bool forwarded = false;
    };
    std::vector<relay> relays_;               ///< the current round's, kept between rounds
    std::vector<unsigned char> relay_buffer_; ///< one message per relay
};

class request_impl {
public:
    std::shared_ptr<communicator_impl> comm;
    program compiled; ///< this rank's program for the request's counts and displacements
    const void* send = nullptr;
    void* recv = nullptr;
    std::unique_ptr<operation> execution; ///< carries the program out, once per start
    bool active = false;
    std::vector<std::size_t> sendcounts; ///< for traces (when the communicator traces)

    ~request_impl();
    status start();
    status test(bool& done);
    status wait();

private:
    status finish(status s);
};

} // namespace fast::exec::detail
