#pragma once
/// \file work.hpp
/// The c10d::Work of one collective call of the fast backend: it holds the call's tensors until
/// the call has run, completes from the group's worker thread, and turns an executor error into
/// the exception that Work.wait() raises in Python (RuntimeError with the executor's message, or
/// ValueError for arguments that gloo refuses with one).

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace fast_torch {

class work final : public c10d::Work {
public:
    /// `what` names the call in errors ("all_to_all_single"); `call` is its number in the group.
    work(int rank, c10d::OpType type, std::string what, std::uint64_t call, std::vector<at::Tensor> outputs,
         std::vector<at::Tensor> inputs);

    /// Completes the call: `error` empty for success, else the line Work.wait() raises, as
    /// ValueError if `value_error`, else as RuntimeError (what gloo raises for the same cause).
    void complete(const std::string& error, bool value_error = false);

    /// Waits for completion (without a timeout: every wait inside the executor is bounded by the
    /// group's timeout, so the call always completes); raises the call's error.
    bool wait(std::chrono::milliseconds timeout) override;
    std::vector<at::Tensor> result() override { return outputs_; }
    /// Completes with the output tensors, or with the call's error.
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

    [[nodiscard]] const std::string& what() const noexcept { return what_; }
    [[nodiscard]] std::uint64_t call() const noexcept { return call_; }

private:
    std::string what_;
    std::uint64_t call_;
    std::vector<at::Tensor> outputs_;
    std::vector<at::Tensor> inputs_; // kept alive until the call has run
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

} // namespace fast_torch
