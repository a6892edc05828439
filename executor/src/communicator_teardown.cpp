// How a communicator ends: a failure marks it unusable and tells the peers; destruction closes
// the worker before the memory UCX may still write to.

#include "communicator_impl.hpp"

#include <algorithm>
#include <chrono>
#include <new>

namespace fast::exec::detail {

communicator_impl::~communicator_impl() {
    write_trace();
    operation_.reset();
    // The worker first: closing it progresses UCX, and a receive abandoned after a failure may
    // still write into scratch (or use the device stream) until the worker is gone.
    worker_.close();
    if (scratch_ != nullptr && memory_) memory_->release(scratch_);
    memory_.reset();
}

void communicator_impl::mark_failed(const status& s) noexcept {
    if (!failed_.ok()) return;
    failed_ = s.ok() ? status(errc::internal, "unknown failure") : s;
    // Tell the peers (unless they were told already, or told us).
    if (size_ > 1)
        worker_.send_abort(static_cast<int>(failed_.code()), failed_.message(),
                           std::min(cfg_.timeout, std::chrono::milliseconds(1000)));
}

status communicator_impl::check_usable(const char* what) const {
    if (!failed_.ok())
        return status(errc::comm_failed,
                      "rank " + std::to_string(rank_) + ": " + what +
                          " on a communicator that failed earlier (destroy it): " + failed_.message());
    if (busy_)
        return status(errc::busy, "rank " + std::to_string(rank_) + ": " + what +
                                      " while another operation of this communicator is in progress");
    return {};
}

// An exception in the middle of a call (out of host memory) leaves this rank out of step with
// its peers, which wait for it in an exchange or a step: the communicator fails, and they are
// told. Call from a catch block.
status communicator_impl::fail_thrown() noexcept {
    errc code = errc::internal;
    try {
        throw;
    } catch (const std::bad_alloc&) {
        code = errc::out_of_memory;
    } catch (...) {}
    const char* what = code == errc::out_of_memory ? "out of host memory" : "unexpected exception inside the executor";
    status failure(code, what);
    try {
        failure = status(code, "rank " + std::to_string(rank_) + ": " + what);
    } catch (...) {}
    mark_failed(failure);
    return failure;
}

} // namespace fast::exec::detail
