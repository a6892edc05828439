#pragma once
/// \file backend.hpp
/// fast_torch::backend: the c10d::Backend behind torch.distributed's "fast" backend (PyTorch 2),
/// registered for CPU and CUDA tensors. all_to_all_single and all_to_all (alltoall) run on
/// fast::exec communicators (FAST plans over UCX) bootstrapped over the group's c10d Store; every
/// other collective goes to an inner fallback backend (gloo) or fails with "not supported by the
/// fast backend".
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

#include <torch/csrc/distributed/c10d/Backend.hpp>
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

class backend final : public c10d::Backend {
public:
    /// Collective over the group: creates the host communicator (UCX endpoints to every rank).
    /// Throws c10::Error with the executor's message if that fails on any rank. `fallback` may
    /// be null (then other collectives are refused).
    backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, settings s,
            c10::intrusive_ptr<c10d::Backend> fallback);
    ~backend() override;

    const std::string getBackendName() const override { return "fast"; }

    c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                     std::vector<std::int64_t>& output_split_sizes,
                                                     std::vector<std::int64_t>& input_split_sizes,
                                                     const c10d::AllToAllOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& output_tensors,
                                            std::vector<at::Tensor>& input_tensors,
                                            const c10d::AllToAllOptions& opts) override;

    /// The host communicator's counters and server grouping (runs on the worker thread, after
    /// the calls already queued).
    struct info {
        fast::exec::statistics stats;
        int servers = 0;
        int gpus_per_server = 0;
    };
    [[nodiscard]] info describe();

    // Everything else that gloo runs: the fallback group, or "not supported by the fast backend".
    // (The deprecated aliases of c10d::Backend, e.g. _allgather_base, forward to these.)
    using tensors = std::vector<at::Tensor>;
    using tensor_lists = std::vector<std::vector<at::Tensor>>;
    c10::intrusive_ptr<c10d::Work> broadcast(tensors& t, const c10d::BroadcastOptions& o) override;
    c10::intrusive_ptr<c10d::Work> allreduce(tensors& t, const c10d::AllreduceOptions& o) override;
    c10::intrusive_ptr<c10d::Work> allreduce_sparse(tensors& t, const c10d::AllreduceOptions& o) override;
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(tensors& t, const c10d::AllreduceCoalescedOptions& o) override;
    c10::intrusive_ptr<c10d::Work> reduce(tensors& t, const c10d::ReduceOptions& o) override;
    c10::intrusive_ptr<c10d::Work> allgather(tensor_lists& out, tensors& in, const c10d::AllgatherOptions& o) override;
    c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& out, at::Tensor& in,
                                                     const c10d::AllgatherOptions& o) override;
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(tensor_lists& out, tensors& in,
                                                       const c10d::AllgatherOptions& o) override;
    c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(tensors& out, tensors& in,
                                                               const c10d::AllgatherOptions& o) override;
    c10::intrusive_ptr<c10d::Work> gather(tensor_lists& out, tensors& in, const c10d::GatherOptions& o) override;
    c10::intrusive_ptr<c10d::Work> scatter(tensors& out, tensor_lists& in, const c10d::ScatterOptions& o) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(tensors& out, tensor_lists& in,
                                                  const c10d::ReduceScatterOptions& o) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter_single(at::Tensor& out, at::Tensor& in,
                                                         const c10d::ReduceScatterOptions& o) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(tensors& out, tensors& in,
                                                                   const c10d::ReduceScatterOptions& o) override;
    c10::intrusive_ptr<c10d::Work> send(tensors& t, int dst, int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(tensors& t, int src, int tag) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(tensors& t, int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override;
    void monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all_ranks) override;
    uint64_t getSequenceNumberForGroup() override;

private:
    struct call;
    c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, const char* what, tensors outputs, tensors inputs,
                                          std::unique_ptr<call> c);
    refusal run(call& c);
    fast::exec::communicator* communicator_for(const c10::Device& device, std::string& error);
    c10d::Backend& fallback(const char* op);

    c10::intrusive_ptr<c10d::Store> store_;
    settings settings_;
    c10::intrusive_ptr<c10d::Backend> fallback_;
    fast::exec::communicator host_;
    fast::exec::communicator device_; // created at the first call on device tensors
    std::string device_error_;        // why device_ could not be created (then every device call fails)
    std::mutex submit_mutex_;         // call numbers in queue order
    std::uint64_t calls_ = 0;
    std::unique_ptr<worker> worker_; // last: stopped (and drained) before the communicators go
};

} // namespace fast_torch
