#include "work.hpp"

#include <c10/util/Exception.h>

namespace fast_torch {

work::work(int rank, c10d::OpType type, std::string what, std::uint64_t call, std::vector<at::Tensor> outputs,
           std::vector<at::Tensor> inputs)
    : c10d::Work(rank, type), what_(std::move(what)), call_(call), outputs_(std::move(outputs)),
      inputs_(std::move(inputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void work::complete(const std::string& error, bool value_error) {
    if (error.empty()) {
        finish();
        future_->markCompleted(c10::IValue(outputs_));
        return;
    }
    // No backtrace: Python shows the line itself (RuntimeError).
    auto failure = value_error ? std::make_exception_ptr(c10::ValueError(error))
                               : std::make_exception_ptr(c10::Error(error));
    finish(failure);
    future_->setError(failure);
}

bool work::wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout == kNoTimeout) {
        cv_.wait(lock, [this] { return completed_; });
    } else if (!cv_.wait_for(lock, timeout, [this] { return completed_; })) {
        TORCH_CHECK(false, "fast backend: rank ", rank_, ": ", what_, " (call ", call_, ") did not complete within ",
                    timeout.count(), " ms");
    }
    if (exception_) std::rethrow_exception(exception_);
    return true;
}

} // namespace fast_torch
