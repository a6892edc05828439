#pragma once
/// \file agreement.hpp
/// The count agreement a runtime runs before every call, and what it costs in the cost model:
/// the part of a call's time that is neither planning nor the exchange. Before it plans, every
/// rank must hold what its plan depends on and know that the counts match (rank j expects from
/// rank i what rank i sends it); a mismatch must give the same error on every rank. Two ways:
///
///  - gather: every rank sends every other rank its sendcounts and recvcounts (one round, 2 R
///    numbers to each of R - 1 ranks): every rank holds the whole matrix and checks every
///    column. Cheap for small clusters; R^2 numbers to every rank for large ones.
///  - servers: (1) within each server its ranks share their rows and columns over scale-up;
///    (2) rank (s, k) sends rank (d, k) of every other server its server's part of the shared
///    counts (counts.hpp) and the G counts of tile (s, d) that rank (d, k) receives, which it
///    checks against its recvcounts; (3) within each server the ranks share what they found,
///    (4) and rank (s, k) sends it to rank (d, k) of every other server. Each rank then holds
///    the shared counts, its server's rows and columns, and every server's findings: the same
///    outcome everywhere. O(S (S + G)) numbers to every rank over the network.
///
/// plan_agreement picks the one the model predicts faster; the executor runs that one (its
/// message sizes are these, tests/executor checks them).
///
///     const fast::agreement a = fast::plan_agreement(topo);
///     std::printf("%s: %lld bytes per rank, %.1f us\n", a.name(), a.network_bytes, a.us);

#include <cstdint>
#include <string_view>

#include "cost.hpp"
#include "counts.hpp"
#include "topology.hpp"

namespace fast {

enum class agreement_kind { gather, servers };

[[nodiscard]] constexpr std::string_view to_string(agreement_kind k) noexcept {
    return k == agreement_kind::gather ? "gather" : "servers";
}

/// Bytes of the fixed header of every agreement message (the executor's wire format: magic,
/// call number, call kind, error code, layout flags and an error text).
inline constexpr std::int64_t agreement_header_bytes = 272;
/// Bytes of one server's findings (rounds 3 and 4 of `servers`): mismatches, first mismatch.
inline constexpr std::int64_t agreement_finding_bytes = 48;

/// One rank's share of the agreement.
struct agreement {
    agreement_kind kind = agreement_kind::gather;
    int rounds = 0;                 ///< rounds, each waiting for the last
    std::int64_t network_bytes = 0; ///< received by one rank over scale-out, all rounds
    std::int64_t local_bytes = 0;   ///< received by one rank over scale-up, all rounds
    double us = 0;                  ///< the model's time: per round alpha + bytes / bandwidth
    [[nodiscard]] std::string_view name() const noexcept { return to_string(kind); }
};

namespace detail {
// A round in which a rank receives `network` bytes over scale-out and `local` over scale-up:
// each port's batch, the round ends with the later (cost.hpp).
inline void add_round(agreement& a, const topology& t, std::int64_t network, std::int64_t local) {
    double end = 0;
    if (network > 0) end = t.alpha_out_us + transfer_us(network, t.scale_out_gbps);
    if (local > 0) end = std::max(end, t.alpha_up_us + transfer_us(local, t.scale_up_gbps));
    a.network_bytes += network;
    a.local_bytes += local;
    a.us += end;
    ++a.rounds;
}
} // namespace detail

/// Bytes of one message of each round of `servers`: (1) a rank's row and column, (2) a
/// server's part and the receiver's G counts, (3, 4) findings.
[[nodiscard]] inline std::int64_t agreement_row_message_bytes(const topology& t) noexcept {
    return agreement_header_bytes + 16 * static_cast<std::int64_t>(t.ranks());
}
[[nodiscard]] inline std::int64_t agreement_part_message_bytes(const topology& t) noexcept {
    return agreement_header_bytes + 8 * (static_cast<std::int64_t>(server_part_size(t)) + t.gpus_per_server);
}

/// The agreement of kind `kind` on `t`.
[[nodiscard]] inline agreement agreement_of(const topology& t, agreement_kind kind) noexcept {
    agreement a;
    a.kind = kind;
    const std::int64_t g = t.gpus_per_server;
    const std::int64_t others = t.servers - 1; // servers a rank hears from over scale-out
    if (t.ranks() < 2) return a;
    if (kind == agreement_kind::gather) {
        const std::int64_t message = agreement_row_message_bytes(t); // same size as a row and column
        detail::add_round(a, t, others * g * message, (g - 1) * message);
        return a;
    }
    detail::add_round(a, t, 0, (g - 1) * agreement_row_message_bytes(t));
    detail::add_round(a, t, others * agreement_part_message_bytes(t), 0);
    detail::add_round(a, t, 0, (g - 1) * agreement_finding_bytes);
    detail::add_round(a, t, others * agreement_finding_bytes, 0);
    return a;
}

/// The agreement the model predicts faster on `t` (gather on ties). Alike on every rank.
[[nodiscard]] inline agreement plan_agreement(const topology& t) noexcept {
    const agreement gather = agreement_of(t, agreement_kind::gather);
    const agreement servers = agreement_of(t, agreement_kind::servers);
    return servers.us < gather.us ? servers : gather;
}

} // namespace fast
