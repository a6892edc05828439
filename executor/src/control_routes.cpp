#include "control_routes.hpp"

namespace fast::exec::detail {

control_routes::control_routes(const fast::topology& topo, const std::vector<double>& rates) : topo_(topo) {
    bool down = false;
    for (const double r : rates) down = down || r == 0;
    if (!down || rates.size() != static_cast<std::size_t>(topo.ranks())) return;
    const int g = topo.gpus_per_server;
    stand_in_.assign(rates.size(), -1);
    for (int r = 0; r < topo.ranks(); ++r) {
        const int first = topo.server_of(r) * g;
        for (int k = 0; k < g && stand_in_[static_cast<std::size_t>(r)] < 0; ++k) {
            const int peer = first + (topo.local_of(r) + k) % g;
            if (rates[static_cast<std::size_t>(peer)] > 0) stand_in_[static_cast<std::size_t>(r)] = peer;
        }
        if (stand_in_[static_cast<std::size_t>(r)] < 0) stand_in_[static_cast<std::size_t>(r)] = r; // a lone server
    }
}

bool control_routes::cut_off(int a, int b) const noexcept {
    return any() && topo_.server_of(a) != topo_.server_of(b) && (stand_in(a) != a || stand_in(b) != b);
}

int control_routes::stand_in(int r) const noexcept {
    return any() ? stand_in_[static_cast<std::size_t>(r)] : r;
}

int control_routes::next_hop(int at, int a, int b) const noexcept {
    if (!cut_off(a, b)) return b;
    const int from = stand_in(a), to = stand_in(b);
    if (at == a && from != a) return from;
    if (at != to && to != b) return to;
    return b;
}

int control_routes::previous_hop(int at, int a, int b) const noexcept {
    int from = a;
    for (int hop = next_hop(a, a, b); hop != at && hop != b; hop = next_hop(hop, a, b)) from = hop;
    return from;
}

rank_group control_routes::group_of(const rank_group& mine, int r) const noexcept {
    const int g = topo_.gpus_per_server;
    if (mine.count == topo_.ranks()) return mine;                                             // all ranks
    if (mine.step == g && mine.count == topo_.servers) return rank_group::rail(topo_.local_of(r), g, topo_.servers);
    return rank_group::server(topo_.server_of(r), g);
}

} // namespace fast::exec::detail
