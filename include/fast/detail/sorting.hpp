#pragma once
// Sorting without allocating, for the planner's short lists.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tuning.hpp"

namespace fast::detail {

/// Sorts [first, last) by `before` (a strict order), keeping the order of equal elements:
/// each element moves back past those it goes before. O(n + inversions): for short or nearly
/// sorted lists.
template <class It, class Before>
void insertion_sort(It first, It last, Before before) {
    if (first == last) return;
    for (It j = first + 1; j != last; ++j) {
        const auto x = *j;
        It at = j;
        for (; at != first && before(x, *(at - 1)); --at) *at = *(at - 1);
        *at = x;
    }
}

/// Sorts `order` by key(x) ascending, keeping the current order among equal keys, without
/// allocating (std::stable_sort takes a temporary buffer). Short lists, often nearly sorted
/// (a schedule step shortens only its longest pieces), take an insertion sort.
template <class Key>
void stable_sort_by(std::vector<std::size_t>& order, std::vector<std::pair<std::int64_t, std::size_t>>& keys, Key key) {
    keys.resize(order.size());
    for (std::size_t j = 0; j < order.size(); ++j) keys[j] = {key(order[j]), order[j]};
    if (order.size() <= tuning::insertion_sort_max) {
        insertion_sort(keys.begin(), keys.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    } else {
        for (std::size_t j = 0; j < order.size(); ++j) keys[j].second = j;
        std::sort(keys.begin(), keys.end());
        for (std::size_t j = 0; j < order.size(); ++j) keys[j].second = order[keys[j].second];
    }
    for (std::size_t j = 0; j < order.size(); ++j) order[j] = keys[j].second;
}

} // namespace fast::detail
