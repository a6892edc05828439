#include "backend.hpp"

#include "store_bootstrap.hpp"

#include <Python.h> // the GIL, in the destructor

#include <c10/core/DeviceGuard.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <future>
#include <optional>

namespace fast_torch {

namespace {
// Store keys, under the group's own prefix (PyTorch hands each group a PrefixStore).
constexpr const char* host_keys = "fast/host";
constexpr const char* device_keys = "fast/device";
constexpr const char* error_keys = "fast/error";
} // namespace

/// One queued call: the executor's arguments, or why this rank cannot run it.
struct backend::call {
    exchange x;
    refusal error;
    std::optional<c10::Stream> stream; // device tensors: the stream their producers ran on
    std::uint64_t number = 0;
    const char* what = "";
};

backend::backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, settings s,
                 c10::intrusive_ptr<c10d::Backend> fallback)
    : c10d::Backend(rank, size), store_(store), settings_(std::move(s)), fallback_(std::move(fallback)) {
    const fast::exec::status st = fast::exec::create(
        make_store_bootstrap(store_, host_keys, rank, size, settings_.config.timeout), settings_.config, host_);
    TORCH_CHECK(st.ok(), "fast backend: rank ", rank, ": creating the group failed: ", st.message());
    worker_ = std::make_unique<worker>();
    init();
}

backend::~backend() {
    // Python destroys groups holding the GIL, and the worker may need the GIL to drop the last
    // reference to a tensor that Python made (its PyObject goes with it): let go of it while the
    // worker finishes what is queued. The communicators go after it.
    PyThreadState* python = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
    worker_.reset();
    if (python != nullptr) PyEval_RestoreThread(python);
}

c10::intrusive_ptr<c10d::Work> backend::all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                          std::vector<std::int64_t>& output_split_sizes,
                                                          std::vector<std::int64_t>& input_split_sizes,
                                                          const c10d::AllToAllOptions& /* group timeout */) {
    auto c = std::make_unique<call>();
    c->error = make_single_exchange(output, input, output_split_sizes, input_split_sizes, size_, c->x);
    return submit(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {output}, {input}, std::move(c));
}

c10::intrusive_ptr<c10d::Work> backend::alltoall(std::vector<at::Tensor>& output_tensors,
                                                 std::vector<at::Tensor>& input_tensors,
                                                 const c10d::AllToAllOptions& /* group timeout */) {
    auto c = std::make_unique<call>();
    c->error = make_list_exchange(output_tensors, input_tensors, size_, c->x);
    return submit(c10d::OpType::ALLTOALL, "all_to_all", output_tensors, input_tensors, std::move(c));
}

c10::intrusive_ptr<c10d::Work> backend::submit(c10d::OpType type, const char* what, tensors outputs, tensors inputs,
                                               std::unique_ptr<call> c) {
    c10::Device& device = c->x.device;
    if (device.is_cuda() && !c->error) {
        c->stream = c10::impl::VirtualGuardImpl(device.type()).getStream(device);
    } else if (!device.is_cpu() && !device.is_cuda()) {
        if (!c->error)
            c->error = {"tensors on " + device.str() + " are not supported by the fast backend (cpu and cuda are)"};
        device = c10::Device(c10::DeviceType::CPU); // the call then fails over the host communicator
    }
    c->what = what;
    const std::lock_guard<std::mutex> lock(submit_mutex_);
    c->number = ++calls_;
    auto w = c10::make_intrusive<work>(rank_, type, what, c->number, std::move(outputs), std::move(inputs));
    worker_->submit([this, w, c = std::shared_ptr<call>(std::move(c))] {
        refusal error;
        try {
            error = run(*c);
        } catch (const c10::Error& e) {
            error = {std::string("fast backend: ") + c->what + ": " + e.what_without_backtrace()};
        } catch (const std::exception& e) {
            error = {std::string("fast backend: ") + c->what + ": " + e.what()};
        }
        w->complete(error.text, error.value_error);
    });
    return w;
}

refusal backend::run(call& c) {
    const std::string prefix = "fast backend: rank " + std::to_string(rank_) + ": " + c.what + ": ";
    std::string error;
    fast::exec::communicator* comm = communicator_for(c.x.device, error);
    if (comm == nullptr) return {prefix + (c.error ? c.error.text : error), c.error.value_error};
    if (c.error) {
        // Take part anyway, with arguments the executor refuses on every rank (empty count
        // arrays), so that no peer waits for this rank; the peers read the reason from the store.
        publish_error(*store_, error_keys, c.number, rank_, prefix + c.error.text);
        (void)comm->alltoallv(nullptr, {}, {}, nullptr, {}, {});
        return {prefix + c.error.text, c.error.value_error};
    }
    std::optional<c10::StreamGuard> guard;
    if (c.stream) {
        guard.emplace(*c.stream); // also where finish_exchange copies
        c.stream->synchronize();  // the producers of the input have finished
    }
    const fast::exec::status st =
        comm->alltoallv(c.x.send, c.x.sendcounts, c.x.sdispls, c.x.recv, c.x.recvcounts, c.x.rdispls);
    if (st.ok()) {
        finish_exchange(c.x);
        if (c.stream) c.stream->synchronize(); // the copies too, before Work.wait() returns
        return {};
    }
    if (st.code() == fast::exec::errc::invalid_argument) {
        const std::string theirs = find_error(*store_, error_keys, c.number, size_);
        if (!theirs.empty()) return {prefix + "another rank could not run this call: " + theirs};
    }
    if (st.code() == fast::exec::errc::count_mismatch && c.x.row_bytes > 0)
        return {prefix + st.message() + " (split sizes count rows of " + std::to_string(c.x.row_bytes) + " bytes)"};
    return {prefix + st.message()};
}

fast::exec::communicator* backend::communicator_for(const c10::Device& device, std::string& error) {
    if (device.is_cpu()) return &host_;
    // Every rank makes its first device call at the same point of the sequence: a collective.
    if (!device_.valid() && device_error_.empty()) {
        const c10::DeviceGuard guard(device);
        fast::exec::config cfg = settings_.config;
        cfg.memory = settings_.device_memory;
        const fast::exec::status st =
            fast::exec::create(make_store_bootstrap(store_, device_keys, rank_, size_, cfg.timeout), cfg, device_);
        if (!st.ok()) device_error_ = "cannot run on " + device.str() + " tensors: " + st.message();
    }
    error = device_error_;
    return device_.valid() ? &device_ : nullptr;
}

backend::info backend::describe() {
    auto done = std::make_shared<std::promise<info>>();
    std::future<info> result = done->get_future();
    worker_->submit([this, done] { done->set_value(info{host_.stats(), host_.servers(), host_.gpus_per_server()}); });
    return result.get();
}

c10d::Backend& backend::fallback(const char* op) {
    TORCH_CHECK(fallback_, "fast backend: rank ", rank_, ": ", op,
                " is not supported by the fast backend (it runs all_to_all_single and all_to_all); with "
                "FAST_TORCH_FALLBACK=gloo (the default) other collectives run on an inner gloo group");
    return *fallback_;
}

// --- everything else: the fallback group ------------------------------------------------------

using work_ptr = c10::intrusive_ptr<c10d::Work>;

work_ptr backend::broadcast(tensors& t, const c10d::BroadcastOptions& o) {
    return fallback("broadcast").broadcast(t, o);
}
work_ptr backend::allreduce(tensors& t, const c10d::AllreduceOptions& o) {
    return fallback("all_reduce").allreduce(t, o);
}
work_ptr backend::allreduce_sparse(tensors& t, const c10d::AllreduceOptions& o) {
    return fallback("all_reduce (sparse)").allreduce_sparse(t, o);
}
work_ptr backend::allreduce_coalesced(tensors& t, const c10d::AllreduceCoalescedOptions& o) {
    return fallback("all_reduce_coalesced").allreduce_coalesced(t, o);
}
work_ptr backend::reduce(tensors& t, const c10d::ReduceOptions& o) {
    return fallback("reduce").reduce(t, o);
}
work_ptr backend::allgather(tensor_lists& out, tensors& in, const c10d::AllgatherOptions& o) {
    return fallback("all_gather").allgather(out, in, o);
}
work_ptr backend::all_gather_single(at::Tensor& out, at::Tensor& in, const c10d::AllgatherOptions& o) {
    return fallback("all_gather_into_tensor").all_gather_single(out, in, o);
}
work_ptr backend::allgather_coalesced(tensor_lists& out, tensors& in, const c10d::AllgatherOptions& o) {
    return fallback("all_gather_coalesced").allgather_coalesced(out, in, o);
}
work_ptr backend::all_gather_single_coalesced(tensors& out, tensors& in, const c10d::AllgatherOptions& o) {
    return fallback("all_gather_into_tensor (coalesced)").all_gather_single_coalesced(out, in, o);
}
work_ptr backend::gather(tensor_lists& out, tensors& in, const c10d::GatherOptions& o) {
    return fallback("gather").gather(out, in, o);
}
work_ptr backend::scatter(tensors& out, tensor_lists& in, const c10d::ScatterOptions& o) {
    return fallback("scatter").scatter(out, in, o);
}
work_ptr backend::reduce_scatter(tensors& out, tensor_lists& in, const c10d::ReduceScatterOptions& o) {
    return fallback("reduce_scatter").reduce_scatter(out, in, o);
}
work_ptr backend::reduce_scatter_single(at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& o) {
    return fallback("reduce_scatter_tensor").reduce_scatter_single(out, in, o);
}
work_ptr backend::reduce_scatter_single_coalesced(tensors& out, tensors& in, const c10d::ReduceScatterOptions& o) {
    return fallback("reduce_scatter_tensor (coalesced)").reduce_scatter_single_coalesced(out, in, o);
}
work_ptr backend::send(tensors& t, int dst, int tag) {
    return fallback("send").send(t, dst, tag);
}
work_ptr backend::recv(tensors& t, int src, int tag) {
    return fallback("recv").recv(t, src, tag);
}
work_ptr backend::recvAnysource(tensors& t, int tag) {
    return fallback("recv (any source)").recvAnysource(t, tag);
}
work_ptr backend::barrier(const c10d::BarrierOptions& o) {
    return fallback("barrier").barrier(o);
}
void backend::monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all_ranks) {
    fallback("monitored_barrier").monitoredBarrier(o, wait_all_ranks);
}
uint64_t backend::getSequenceNumberForGroup() {
    return fallback("sequence numbers").getSequenceNumberForGroup();
}

} // namespace fast_torch
