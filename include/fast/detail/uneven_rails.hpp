#pragma once
// Rails of unequal rates (the planner on an uneven fabric). Rail i between servers s and d runs
// at the slower of the two NICs' rates (GPU i of s sends only to GPU i of d), so each server
// pair's bytes go over its rails in proportion to those rates, and all of the pair's rails
// finish together; a rail with a NIC down carries nothing. The schedule is built in time (bytes
// at the reference rate, the fastest rank's), where every rail of a pair needs the same time,
// so the paper's layout applies unchanged; each slot's time then becomes its rail's bytes.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../error.hpp"
#include "schedule.hpp"

namespace fast::detail {

/// A call's server pairs on uneven rails. Pairs s * S + d; (pair, rail) entries (s * S + d) * G + i.
struct uneven_traffic {
    std::vector<std::int64_t> share;  ///< per (pair, rail): the bytes the rail carries
    std::vector<std::int64_t> time;   ///< per (pair, rail): its time, in bytes at the reference rate
    std::vector<double> rate;         ///< per (pair, rail): its rate (the slower NIC), GB/s
    std::vector<std::int64_t> server; ///< S x S: each pair's time, the longest of its rails'
    double reference = 1;             ///< GB/s of one unit of time per byte
};

// The pair's `total` bytes over its rails in proportion to `rate` (some above 0, finite): floors,
// then the bytes left one each to the rails with a rate, in index order (fewer than the rails).
inline void proportional_shares(std::int64_t total, std::span<const double> rate, std::span<std::int64_t> share) {
    const double top = *std::max_element(rate.begin(), rate.end());
    long double sum = 0; // of the rates over the fastest: at most the rail count, never infinite
    for (const double r : rate) sum += r / top;
    std::int64_t given = 0;
    for (std::size_t i = 0; i < rate.size(); ++i) {
        const long double exact = static_cast<long double>(total) * (rate[i] / top) / sum;
        const std::int64_t floor =
            exact >= static_cast<long double>(total) ? total : static_cast<std::int64_t>(std::floor(exact));
        share[i] = std::min(total - given, floor);
        given += share[i];
    }
    for (std::size_t i = 0; given < total; i = (i + 1) % rate.size())
        if (rate[i] > 0) ++share[i], ++given;
}

// Throws where a line of the S x S time matrix passes 2^62 (decomposition adds lines in int64).
inline void check_time_fits(std::span<const std::int64_t> time, std::size_t us) {
    for (std::size_t k = 0; k < us; ++k) {
        long double row = 0, col = 0;
        for (std::size_t j = 0; j < us; ++j) row += static_cast<long double>(time[k * us + j]), col += time[j * us + k];
        if (std::max(row, col) >= static_cast<long double>(std::int64_t{1} << 62))
            throw invalid_argument("server " + std::to_string(k) +
                                   "'s bytes take too long on its slow rails to plan: over 2^62 bytes' time at the "
                                   "fastest rate");
    }
}

/// Fills `out` from the S x S pair matrix `pair` and each rank's rate `rates` (server-major, G
/// per server) at `reference` GB/s. Throws fast::invalid_argument naming the servers where a
/// pair with bytes has no rail with both NICs up, or a server whose time, counted in bytes at the
/// reference rate, passes 2^62 (slow rails make a call of nearly 2^63 bytes longer). O(S^2 G).
inline void summarize_uneven(std::span<const std::int64_t> pair, int servers, int g, std::span<const double> rates,
                             double reference, uneven_traffic& out) {
    const auto us = static_cast<std::size_t>(servers);
    const auto ug = static_cast<std::size_t>(g);
    out.reference = reference;
    out.share.assign(us * us * ug, 0);
    out.time.assign(us * us * ug, 0);
    out.rate.assign(us * us * ug, 0.0);
    out.server.assign(us * us, 0);
    for (std::size_t s = 0; s < us; ++s)
        for (std::size_t d = 0; d < us; ++d) {
            const std::int64_t total = pair[s * us + d];
            if (s == d || total == 0) continue;
            const std::size_t at = (s * us + d) * ug;
            bool any = false;
            for (std::size_t i = 0; i < ug; ++i) {
                out.rate[at + i] = std::min(rates[s * ug + i], rates[d * ug + i]);
                any = any || out.rate[at + i] > 0;
            }
            if (!any)
                throw invalid_argument("servers " + std::to_string(s) + " and " + std::to_string(d) +
                                       " have no rail with both NICs up, and " + std::to_string(total) +
                                       " bytes to exchange");
            proportional_shares(total, {out.rate.data() + at, ug}, {out.share.data() + at, ug});
            for (std::size_t i = 0; i < ug; ++i) {
                if (out.share[at + i] == 0) continue;
                const double time = std::ceil(static_cast<double>(out.share[at + i]) * reference / out.rate[at + i]);
                out.time[at + i] = time >= 0x1p62 ? std::int64_t{1} << 62 : static_cast<std::int64_t>(time);
                out.server[s * us + d] = std::max(out.server[s * us + d], out.time[at + i]);
            }
        }
    check_time_fits(out.server, us);
}

/// Turns `sc`, built in time, into bytes: each (pair, rail)'s slots, in step order, carry the
/// bytes its rate moves in their cumulative time, the last of them whatever is left. `done` is a
/// workspace. O(slots S).
inline void time_to_bytes(stage_schedule& sc, const uneven_traffic& u, std::vector<std::int64_t>& done_time,
                          std::vector<std::int64_t>& done_bytes, std::vector<std::size_t>& begin,
                          std::vector<std::size_t>& members) {
    const auto us = static_cast<std::size_t>(sc.servers);
    const auto ug = static_cast<std::size_t>(sc.rails);
    done_time.assign(u.share.size(), 0);
    done_bytes.assign(u.share.size(), 0);
    slots_by_step(sc, begin, members);
    for (const std::size_t j : members) {
        const auto& x = sc.slots[j];
        const auto perm = sc.perm_of(x);
        const auto bytes = sc.bytes_of(x);
        for (std::size_t s = 0; s < us; ++s) {
            if (bytes[s] == 0) continue;
            const std::size_t key =
                (s * us + static_cast<std::size_t>(perm[s])) * ug + static_cast<std::size_t>(x.rail);
            done_time[key] += bytes[s];
            const double moved = static_cast<double>(done_time[key]) * u.rate[key] / u.reference;
            const std::int64_t now = done_time[key] >= u.time[key] || moved >= static_cast<double>(u.share[key])
                                         ? u.share[key]
                                         : static_cast<std::int64_t>(moved);
            bytes[s] = now - done_bytes[key];
            done_bytes[key] = now;
        }
    }
}

} // namespace fast::detail
