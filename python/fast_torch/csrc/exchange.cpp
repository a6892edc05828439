#include "exchange.hpp"

#include <ATen/ops/empty_like.h>
#include <c10/core/ScalarType.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>

namespace fast_torch {
namespace {

std::string str(std::int64_t v) {
    return std::to_string(v);
}

// None if the executor can read or write `t` as raw bytes, else why not. Like gloo and NCCL, a
// non-contiguous tensor is a ValueError (gloo writes a non-contiguous output as if it were
// contiguous: wrong values; here it is refused too).
refusal check_tensor(const at::Tensor& t, const std::string& name, bool contiguous = true) {
    if (!t.defined()) return {name + " is an undefined tensor"};
    if (t.layout() != c10::kStrided) {
        std::ostringstream layout;
        layout << t.layout();
        return {name + " must be a dense (strided) tensor, it is " + layout.str(), true};
    }
    if (contiguous && !t.is_contiguous())
        return {"Tensors must be contiguous: " + name + " is not (call .contiguous() on it)", true};
    return {};
}

// "" if `t` has the dtype and device of `first`.
std::string check_like(const at::Tensor& t, const std::string& name, const at::Tensor& first,
                       const std::string& first_name) {
    if (t.scalar_type() != first.scalar_type())
        return name + " is " + c10::toString(t.scalar_type()) + " but " + first_name + " is " +
               c10::toString(first.scalar_type()) + " (one dtype for all tensors)";
    if (t.device() != first.device())
        return name + " is on " + t.device().str() + " but " + first_name + " is on " + first.device().str();
    return {};
}

// Counts and displacements (bytes) of one side of all_to_all_single from its split sizes (rows).
std::string split_counts(const std::vector<std::int64_t>& splits, const std::string& name, const std::string& what,
                         std::int64_t rows, std::size_t row_bytes, int ranks, std::vector<std::size_t>& counts,
                         std::vector<std::size_t>& displs) {
    const auto ur = static_cast<std::size_t>(ranks);
    std::vector<std::int64_t> rows_to(ur);
    if (splits.empty()) {
        if (rows % ranks != 0)
            return "the " + what + "'s dim 0 (" + str(rows) + ") does not divide into " + str(ranks) +
                   " equal splits; pass " + name;
        std::fill(rows_to.begin(), rows_to.end(), rows / ranks);
    } else {
        if (splits.size() != ur)
            return name + " has " + std::to_string(splits.size()) + " entries, expected " + str(ranks) +
                   " (one per rank)";
        std::int64_t sum = 0;
        for (std::size_t j = 0; j < ur; ++j) {
            if (splits[j] < 0) return name + "[" + std::to_string(j) + "] = " + str(splits[j]) + " is negative";
            if (splits[j] > std::numeric_limits<std::int64_t>::max() - sum)
                return name + " add up to more than 2^63 rows";
            sum += splits[j];
        }
        if (sum != rows)
            return name + " add up to " + str(sum) + " rows, the " + what + " has " + str(rows) + " (dim 0)";
        rows_to = splits;
    }
    counts.resize(ur);
    displs.resize(ur);
    std::size_t offset = 0;
    for (std::size_t j = 0; j < ur; ++j) {
        counts[j] = static_cast<std::size_t>(rows_to[j]) * row_bytes; // at most the tensor's bytes
        displs[j] = offset;
        offset += counts[j];
    }
    return {};
}

// Elements of one row (one index along dim 0), also where dim 0 is empty.
std::int64_t row_elements(const at::Tensor& t) {
    return c10::multiply_integers(t.sizes().begin() + 1, t.sizes().end());
}

// Counts and displacements of one side of all_to_all from the tensors' own addresses.
template <typename Pointer>
void place(const std::vector<at::Tensor>& tensors, Pointer& base, std::vector<std::size_t>& counts,
           std::vector<std::size_t>& displs) {
    std::uintptr_t low = std::numeric_limits<std::uintptr_t>::max();
    for (const at::Tensor& t : tensors)
        if (t.nbytes() > 0) low = std::min(low, reinterpret_cast<std::uintptr_t>(t.data_ptr()));
    counts.resize(tensors.size());
    displs.resize(tensors.size());
    base = nullptr;
    for (std::size_t j = 0; j < tensors.size(); ++j) {
        counts[j] = tensors[j].nbytes();
        displs[j] = counts[j] > 0 ? reinterpret_cast<std::uintptr_t>(tensors[j].data_ptr()) - low : 0;
        if (counts[j] > 0) base = reinterpret_cast<Pointer>(low);
    }
}

} // namespace

refusal make_single_exchange(const at::Tensor& output, const at::Tensor& input,
                                 const std::vector<std::int64_t>& output_splits,
                                 const std::vector<std::int64_t>& input_splits, int ranks, exchange& out) {
    if (input.defined()) out.device = input.device(); // also for an error: it picks the communicator
    for (const auto& [t, name] : {std::pair{&input, "the input"}, std::pair{&output, "the output"}}) {
        if (refusal r = check_tensor(*t, name)) return r;
        if (t->dim() == 0)
            return {std::string(name) + " is a scalar (0-d); all_to_all_single exchanges rows along dim 0"};
    }
    if (std::string e = check_like(output, "the output", input, "the input"); !e.empty()) return {e};
    const std::int64_t in_row = row_elements(input), out_row = row_elements(output);
    if (in_row != out_row)
        return {"input rows (dim 0) hold " + str(in_row) + " elements, output rows " + str(out_row) +
                " (the sizes past dim 0 must match)"};
    const auto row_bytes = static_cast<std::size_t>(in_row) * input.element_size();
    out.row_bytes = row_bytes;
    if (std::string e = split_counts(input_splits, "input_split_sizes", "input", input.size(0), row_bytes, ranks,
                                     out.sendcounts, out.sdispls);
        !e.empty())
        return {e};
    if (std::string e = split_counts(output_splits, "output_split_sizes", "output", output.size(0), row_bytes, ranks,
                                     out.recvcounts, out.rdispls);
        !e.empty())
        return {e};
    out.send = input.nbytes() > 0 ? input.data_ptr() : nullptr;
    out.recv = output.nbytes() > 0 ? output.data_ptr() : nullptr;
    return {};
}

refusal make_list_exchange(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, int ranks,
                               exchange& out) {
    const auto ur = static_cast<std::size_t>(ranks);
    if (!inputs.empty() && inputs[0].defined()) out.device = inputs[0].device();
    for (const auto& [list, name] :
         {std::pair{&inputs, "input_tensor_list"}, std::pair{&outputs, "output_tensor_list"}})
        if (list->size() != ur)
            return {std::string(name) + " has " + std::to_string(list->size()) + " tensors, expected " +
                    str(ranks) + " (one per rank)"};
    for (const auto& [list, name] :
         {std::pair{&inputs, "input_tensor_list"}, std::pair{&outputs, "output_tensor_list"}})
        for (std::size_t j = 0; j < ur; ++j) {
            const std::string what = std::string(name) + "[" + std::to_string(j) + "]";
            if (refusal r = check_tensor((*list)[j], what, false)) return r;
            if (std::string e = check_like((*list)[j], what, inputs[0], "input_tensor_list[0]"); !e.empty())
                return {e};
        }
    std::vector<at::Tensor> sent(inputs), received(outputs);
    for (std::size_t j = 0; j < ur; ++j) {
        if (!sent[j].is_contiguous()) out.staged_inputs.push_back(sent[j] = sent[j].contiguous());
        if (!received[j].is_contiguous()) {
            received[j] = at::empty_like(received[j], at::MemoryFormat::Contiguous);
            out.copy_back.emplace_back(outputs[j], received[j]);
        }
    }
    place(sent, out.send, out.sendcounts, out.sdispls);
    place(received, out.recv, out.recvcounts, out.rdispls);
    return {};
}

void finish_exchange(exchange& x) {
    for (auto& [user, received] : x.copy_back) user.copy_(received);
    x.copy_back.clear();
    x.staged_inputs.clear();
}

} // namespace fast_torch
