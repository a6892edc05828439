#pragma once
// Routes of control messages around NICs that are down. A control message between ranks of
// different servers leaves through its sender's NIC and arrives through its receiver's. Where
// either is down (a rate of 0 in the fabric, which every rank knows alike), the message goes
// through a stand-in instead: a server peer whose NIC is up carries it out of the sender's server,
// or into the receiver's, over scale-up. So the creation's handshake and every round of the count
// agreement reach a rank whose NIC is down, and no endpoint across servers starts or ends at one.
// FAST's plans move no data through such a NIC (the verifier checks it), so the data never
// needs a route.

#include <vector>

#include <fast/topology.hpp>

#include "exchange_round.hpp"

namespace fast::exec::detail {

class control_routes {
public:
    /// Every pair direct.
    control_routes() = default;
    /// `rates`: every rank's scale-out rate (empty: every NIC up). Every server must have a NIC
    /// up where a NIC is down (the planner refuses the fabric otherwise).
    control_routes(const fast::topology& topo, const std::vector<double>& rates);

    /// Whether some rank's NIC is down.
    [[nodiscard]] bool any() const noexcept { return !stand_in_.empty(); }
    /// Whether ranks a and b reach each other only through stand-ins: different servers, and a's
    /// or b's NIC down.
    [[nodiscard]] bool cut_off(int a, int b) const noexcept;
    /// Rank r where its NIC is up, else the next rank of its server (cyclically) whose NIC is up.
    [[nodiscard]] int stand_in(int r) const noexcept;
    /// Where rank `at` (a itself, or a stand-in on the way) passes a's message for b: b, or the
    /// next stand-in (a's stand-in, then b's). O(1).
    [[nodiscard]] int next_hop(int at, int a, int b) const noexcept;
    /// The rank that passes a's message for b to rank `at` (a rank on its route after a).
    [[nodiscard]] int previous_hop(int at, int a, int b) const noexcept;
    /// The group of rank r in a round where this rank's group is `mine`: the round's groups are
    /// all ranks, each server's or each rail's (exchange_round.hpp).
    [[nodiscard]] rank_group group_of(const rank_group& mine, int r) const noexcept;

    /// Calls carry(a, b) for every message of a round that rank `me` carries as a stand-in (a's
    /// or b's), where this rank's group in the round is `mine`. O(down ranks x group size).
    template <class Carry>
    void for_each_carried(int me, const rank_group& mine, Carry&& carry) const {
        if (!any()) return;
        const int g = topo_.gpus_per_server;
        const int first = topo_.server_of(me) * g;
        for (int d = first; d < first + g; ++d) {
            if (d == me || stand_in(d) != me) continue;
            const rank_group partners = group_of(mine, d);
            for (int k = 0; k < partners.count; ++k) {
                const int p = partners.rank_at(k);
                if (!cut_off(d, p)) continue;
                carry(d, p); // out of d's server
                carry(p, d); // into it
            }
        }
    }

private:
    fast::topology topo_;
    std::vector<int> stand_in_; ///< per rank; empty where every NIC is up
};

} // namespace fast::exec::detail
