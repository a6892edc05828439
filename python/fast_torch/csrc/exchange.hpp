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
#include <vector>

namespace fast_torch {

/// What one rank passes to fast::exec::communicator::alltoallv. All four arrays have one entry
/// per rank; displacements are relative to `send` and `recv`.
struct exchange {
    const void* send = nullptr;
    void* recv = nullptr;
    std::vector<std::size_t> sendcounts, sdispls, recvcounts, rdispls;
    c10::Device device{c10::DeviceType::CPU};
    std::size_t row_bytes = 0; ///< all_to_all_single: bytes of one row (0: the list form)
};

/// all_to_all_single: the block for rank j is input_splits[j] rows of `input`, the block from
/// rank i lands in output_splits[i] rows of `output`, each in rank order; empty split lists mean
/// dim 0 divided equally among `ranks`. Any dtype; both tensors strided, contiguous, of one dtype
/// and device, with equal row shapes (sizes past dim 0). Returns "" or what is wrong
/// (e.g. "input_split_sizes add up to 10 rows, the input has 12 (dim 0)"). O(ranks).
[[nodiscard]] std::string make_single_exchange(const at::Tensor& output, const at::Tensor& input,
                                               const std::vector<std::int64_t>& output_splits,
                                               const std::vector<std::int64_t>& input_splits, int ranks, exchange& out);

/// all_to_all on tensor lists: inputs[j] goes to rank j, the tensor from rank i lands in
/// outputs[i]. The tensors may lie anywhere in memory: displacements are taken from the lowest
/// address of each side. Same requirements per tensor as above. O(ranks).
[[nodiscard]] std::string make_list_exchange(const std::vector<at::Tensor>& outputs,
                                             const std::vector<at::Tensor>& inputs, int ranks, exchange& out);

} // namespace fast_torch
