#pragma once
/// \file exchange.hpp
/// One all-to-all call of PyTorch in the executor's terms: PyTorch's tensors and split sizes (rows
/// along dim 0) turned into byte counts and displacements, MPI_Alltoallv-style, with a one-line
/// error for arguments that cannot be run.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fast_torch {

/// Why a call cannot run, in one line ("" if it can), and whether PyTorch's own backends raise
/// that as ValueError (a non-contiguous tensor: "Tensors must be contiguous") or RuntimeError.
struct refusal {
    std::string text;
    bool value_error = false;
    explicit operator bool() const noexcept { return !text.empty(); }
};

/// What one rank passes to fast::exec::communicator::alltoallv. All four arrays have one entry
/// per rank; displacements are relative to `send` and `recv`.
struct exchange {
    const void* send = nullptr;
    void* recv = nullptr;
    std::vector<std::size_t> sendcounts, sdispls, recvcounts, rdispls;
    c10::Device device{c10::DeviceType::CPU};
    std::size_t row_bytes = 0; ///< all_to_all_single: bytes of one row (0: the list form)
    /// The list form with non-contiguous tensors (which gloo accepts): contiguous copies of such
    /// inputs, sent instead of them; and (the user's output, the contiguous tensor received in
    /// its place), copied over once the call has run (finish_exchange).
    std::vector<at::Tensor> staged_inputs;
    std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;
};

/// all_to_all_single: the block for rank j is input_splits[j] rows of `input`, the block from
/// rank i lands in output_splits[i] rows of `output`, each in rank order; empty split lists mean
/// dim 0 divided equally among `ranks`. Any dtype; both tensors strided, contiguous, of one dtype
/// and device, with equal row shapes (sizes past dim 0). Returns no refusal, or what is wrong
/// (e.g. "input_split_sizes add up to 10 rows, the input has 12 (dim 0)"). O(ranks).
[[nodiscard]] refusal make_single_exchange(const at::Tensor& output, const at::Tensor& input,
                                           const std::vector<std::int64_t>& output_splits,
                                           const std::vector<std::int64_t>& input_splits, int ranks, exchange& out);

/// all_to_all on tensor lists: inputs[j] goes to rank j, the tensor from rank i lands in
/// outputs[i]. The tensors may lie anywhere in memory: displacements are taken from the lowest
/// address of each side. Dense tensors of one dtype and device; non-contiguous ones go through
/// contiguous copies, as with gloo (copying inputs here, on the caller's stream). O(ranks) plus
/// the copies.
[[nodiscard]] refusal make_list_exchange(const std::vector<at::Tensor>& outputs,
                                         const std::vector<at::Tensor>& inputs, int ranks, exchange& out);

/// After the executor has run `x`: the received bytes copied into non-contiguous outputs of the
/// list form (on the current stream of their device). Nothing to do otherwise.
void finish_exchange(exchange& x);

} // namespace fast_torch
