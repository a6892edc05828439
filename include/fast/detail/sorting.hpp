#pragma once
// Sorting without allocating, for the planner's short lists.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tuning.hpp"

namespace fast::detail {

/// Sorts `order` by key(x) ascending, keeping the current order among equal keys, without
/// allocating (std::stable_sort takes a temporary buffer). Short lists, often nearly sorted
/// (a schedule step shortens only its longest pieces), take an insertion sort.
template <class Key>
void stable_sort_by(std::vector<std::size_t>& order, std::vector<std::pair<std::int64_t, std::size_t>>& keys,
                    Key key) {
    keys.resize(order.size());
    for (std::size_t j = 0; j < order.size(); ++j) keys[j] = {key(order[j]), order[j]};
    if (order.size() <= tuning::insertion_sort_max) {
        for (std::size_t j = 1; j < keys.size(); ++j) {
            const auto x = keys[j];
            std::size_t at = j;
            for (; at > 0 && x.first < keys[at - 1].first; --at) keys[at] = keys[at - 1];
            keys[at] = x;
        }
    } else {
        for (std::size_t j = 0; j < order.size(); ++j) keys[j].second = j;
        std::sort(keys.begin(), keys.end());
        for (std::size_t j = 0; j < order.size(); ++j) keys[j].second = order[keys[j].second];
    }
    for (std::size_t j = 0; j < order.size(); ++j) order[j] = keys[j].second;
}
} // namespace fast::detail
