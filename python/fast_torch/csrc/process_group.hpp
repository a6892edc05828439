#pragma once
/// \file process_group.hpp
/// fast_torch::process_group: the c10d::ProcessGroup behind torch.distributed's "fast" backend.
/// all_to_all_single (alltoall_base) and all_to_all (alltoall) run on fast::exec communicators
/// (FAST plans over UCX) bootstrapped over the group's c10d Store; every other collective goes to
/// an inner fallback group (gloo) or fails with "not supported by the fast backend".
///
/// Calls are queued to one worker thread per group and run in order; the Work of a call
/// completes when this rank's part is done. A call that one rank cannot run (bad split sizes, a
/// non-contiguous tensor) still takes part in the collective, so that every rank fails at once
/// with that rank's error instead of waiting for the group's timeout.

#include "exchange.hpp"
#include "work.hpp"
#include "worker.hpp"

#include <fast/exec/communicator.hpp>
#include <fast/exec/config.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fast_torch {

/// How a group runs, validated by the Python layer (fast_torch.Options) and by the executor.
struct settings {
    /// gpus_per_server, scheduler, flow, fabric figures and timeout (the group's).
    fast::exec::config config;
    /// What the executor calls the memory of PyTorch's "cuda" tensors: cuda, or hip on ROCm builds.
    fast::exec::memory device_memory = fast::exec::memory::cuda;
};

class process_group final : public c10d::ProcessGroup {
public:
    /// Collective over the group: creates the host communicator (UCX endpoints to every rank).
    /// Throws c10::Error with the executor's message if that fails on any rank. `fallback` may
    /// be null (then other collectives are refused).
    process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, settings s,
                  c10::intrusive_ptr<c10d::ProcessGroup> fallback);
    ~process_group() override;

    const std::string getBackendName() const override { return "fast"; }

    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<std::int64_t>& output_split_sizes,
                                                 std::vector<std::int64_t>& input_split_sizes,
                                                 const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& output_tensors,
                                            std::vector<at::Tensor>& input_tensors,
                                            const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;

    /// The host communicator's counters and server grouping (runs on the worker thread, after
    /// the calls already queued).
    struct info {
        fast::exec::statistics stats;
        int servers = 0;
        int gpus_per_server = 0;
    };
    [[nodiscard]] info describe();

    // Everything else: the fallback group, or "not supported by the fast backend".
    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override;
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& t,
                                                       const c10d::AllreduceCoalescedOptions& o) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& t, const c10d::ReduceOptions& o) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                             const c10d::AllgatherOptions& o) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                   const c10d::AllgatherOptions& o) override;
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& out,
                                                       std::vector<at::Tensor>& in,
                                                       const c10d::AllgatherOptions& o) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                          const c10d::GatherOptions& o) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
                                           const c10d::ScatterOptions& o) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& out,
                                                  std::vector<std::vector<at::Tensor>>& in,
                                                  const c10d::ReduceScatterOptions& o) override;
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                        const c10d::ReduceScatterOptions& o) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& t, int dst, int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& t, int src, int tag) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& t, int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override;
    void monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all_ranks) override;
    void setSequenceNumberForGroup() override;
    uint64_t getSequenceNumberForGroup() override;

private:
    struct call;
    c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, const char* what, std::vector<at::Tensor> outputs,
                                          std::vector<at::Tensor> inputs, std::unique_ptr<call> c);
    std::string run(call& c);
    fast::exec::communicator* communicator_for(const c10::Device& device, std::string& error);
    c10d::ProcessGroup& fallback(const char* op);

    c10::intrusive_ptr<c10d::Store> store_;
    settings settings_;
    c10::intrusive_ptr<c10d::ProcessGroup> fallback_;
    fast::exec::communicator host_;
    fast::exec::communicator device_; // created at the first call on device tensors
    std::string device_error_;        // why device_ could not be created (then every device call fails)
    std::mutex submit_mutex_;         // call numbers in queue order
    std::uint64_t calls_ = 0;
    std::unique_ptr<worker> worker_; // last: stopped (and drained) before the communicators go
};

} // namespace fast_torch
